"""Write laptop_tables.py's output into README.md: each block's table (the lines starting with "|" after its
"<!-- <title>: made by ... -->" line) replaced by the freshly printed one. A block missing from README.md is
reported, not added (where it goes is the README's choice).

    python results/scripts/readme_tables.py        # from the repository root
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tables(text):
    """{comment line: [table, ...]} of laptop_tables.py's output, a table being its lines starting with "|"."""
    out, key, previous = {}, None, ""
    for line in text.splitlines():
        if line.startswith("<!-- "):
            key = line
            out[key] = []
        elif key and line.startswith("|"):
            if not previous.startswith("|"):
                out[key].append([])
            out[key][-1].append(line)
        previous = line
    return out


def main():
    printed = subprocess.run([sys.executable, os.path.join(ROOT, "results", "scripts", "laptop_tables.py")],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
    path = os.path.join(ROOT, "README.md")
    lines = open(path).read().splitlines()
    for key, new_tables in tables(printed).items():
        if key not in lines:
            print(f"not in README.md: {key}")
            continue
        i = lines.index(key) + 1
        for new in new_tables:  # the block's tables in order, each replacing the next table below the comment
            while not lines[i].startswith("|"):
                i += 1
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            lines[i:j] = new
            i += len(new)
    open(path, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
