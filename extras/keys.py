"""A script's own --key=value keys beside its program's, shared by the scripts in extras/ as nanoGPT's scripts share
its configurator.py; and a run's weights loaded into its program's model, one error line when they do not fit."""


def split_keys(argv, keys, doc, parse_args):
    """(this script's keys: its defaults overridden by argv, the rest of argv: the program's keys). --help prints doc
    and the script's keys with their defaults, then exits. parse_args is the program's (mimetic_vit.parse_args or
    mimetic_lm.parse_args): a wrong value is its `error:` line."""
    if "-h" in argv or "--help" in argv:
        print(doc + "\nThis script's keys and defaults: " + " ".join(f"--{k}={v}" for k, v in keys.items()))
        raise SystemExit(0)
    own = [a for a in argv if a.removeprefix("--").partition("=")[0] in keys]
    return {**keys, **parse_args(own, keys)}, [a for a in argv if a not in own]


def load_weights(model, state, name, program):
    """model.load_state_dict(state); weights of another model (extras/compare.py's layerscale and conv arms add
    some) are one `error:` line naming `name` (the checkpoint) and `program` (the file whose model it is not)."""
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise SystemExit(f"error: {name} holds another model than {program}'s of its config "
                         f"({str(e).splitlines()[0]})") from None
