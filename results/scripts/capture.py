"""Runs a command as a new user would and prints each line it writes with the seconds since launch; stops it
after its first N lines or T seconds. Made the logs beside it (README.md, "Run it"):
    python results/scripts/capture.py 5 90 python mimetic_vit.py > results/cpu-first-lines/vit.txt
With --tty the command writes to a pseudo-terminal, so its in-place line shows (each redraw a line here)."""
import os
import pty
import subprocess
import sys
import threading
import time

tty = sys.argv[1] == "--tty"
n, limit, cmd = int(sys.argv[1 + tty]), float(sys.argv[2 + tty]), sys.argv[3 + tty:]
print(f"$ {' '.join(cmd)}    (load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores)")
t0 = time.time()
if tty:
    leader, follower = pty.openpty()
    p = subprocess.Popen(cmd, stdout=follower, stderr=follower)
    os.close(follower)
    stream = os.fdopen(leader, "r", newline="")
else:
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    stream = p.stdout
threading.Timer(limit, p.kill).start()
line, count = "", 0
while count < n and p.poll() is None or line:
    try:
        c = stream.read(1)
    except OSError:  # the pseudo-terminal closes when the command ends
        break
    if c in ("\n", "\r", ""):
        text = line.replace("\x1b[K", "").strip()
        if text:
            count += 1
            print(f"[{time.time() - t0:6.1f} s] {text}", flush=True)
        line = ""
        if c == "" or count >= n:
            break
    else:
        line += c
p.kill()
os._exit(0)
