"""Execute notebooks with nbclient (what nbval runs under the hood) and keep their outputs,
to read what they show on a GPU: python tools/execute_notebooks.py OUTDIR NB [NB ...].
Runs them in parallel, one kernel each; exits 1 if any cell raised."""

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def run(args):
    path, outdir = args
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    error = None
    try:
        NotebookClient(
            nb,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(Path(path).parent)}},
        ).execute()
    except Exception as e:  # keep the partial outputs, say what failed
        error = f"{type(e).__name__}: {str(e)[-500:]}"
    nbformat.write(nb, Path(outdir) / Path(path).name)
    return path, time.perf_counter() - t0, error


if __name__ == "__main__":
    outdir, paths = sys.argv[1], sys.argv[2:]
    Path(outdir).mkdir(parents=True, exist_ok=True)
    failed = 0
    with ProcessPoolExecutor(max_workers=min(8, len(paths))) as pool:
        for path, seconds, error in pool.map(run, [(p, outdir) for p in paths]):
            print(f"{path}: {seconds:.0f} s {'OK' if error is None else 'ERROR ' + error}")
            failed += error is not None
    sys.exit(1 if failed else 0)
