"""A script's own --key=value keys beside its program's, shared by the scripts in extras/ as nanoGPT's scripts share
its configurator.py."""


def split_keys(argv, keys, doc, parse_args):
    """(this script's keys: its defaults overridden by argv, the rest of argv: the program's keys). --help prints doc
    and the script's keys with their defaults, then exits. parse_args is the program's (mimetic_vit.parse_args or
    mimetic_lm.parse_args): a wrong value is its `error:` line."""
    if "-h" in argv or "--help" in argv:
        print(doc + "\nThis script's keys and defaults: " + " ".join(f"--{k}={v}" for k, v in keys.items()))
        raise SystemExit(0)
    own = [a for a in argv if a.removeprefix("--").partition("=")[0] in keys]
    return {**keys, **parse_args(own, keys)}, [a for a in argv if a not in own]
