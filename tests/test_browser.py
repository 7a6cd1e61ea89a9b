"""Browser test: the course's explorers work in a real JupyterLab, in headless Chromium.

The unit tests (test_widgets.py) check what each explorer computes; this test checks what a
learner sees. It copies the part of the repository that the lessons open (notebooks/,
results/ and tinyllm/weights/MODEL_CARD.md) to a temporary folder (autosave never touches the
tracked files) and starts JupyterLab there as `make lab` does: the options of its recipe in
the Makefile (the repository root served, the Lab landing in notebooks/), from this
environment, on 127.0.0.1, a free port, a random token, settings and workspaces inside the
temporary folder. It drives Debian's Chromium through Playwright. It checks that

- the server refuses API requests without the token (403), the model card and the recorded
  results among them;
- with the token, the contents API serves the repository root: the model card and a
  recording under results/ read back as they are on disk;
- the Lab's default URL lands in notebooks/: `/` redirects there, and in Chromium the file
  browser lists the lessons;
- for each explorer: its notebook opens, all cells run, one control is moved, and every
  cell ran without an error, no output shows "Error displaying widget", and the explorer's
  figure is redrawn (its image differs from the one before the move).

Screenshots of each explorer in use are written to the temporary folder and, when the
environment variable SCREENSHOT_DIR is set, copied there (`make screenshots` copies them to
images/: mask_explorer.png, bucket_explorer.png, timing_explorer.png, pages_explorer.png).

Needs /usr/bin/chromium (`apt-get install chromium`) and the playwright Python package;
Playwright's own browser download is not used. Without them the test is skipped, except
under CI=true or with SCREENSHOT_DIR set, where it fails.
"""

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser  # one Lab: a test file runs on one worker (--dist loadfile)

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
MAKEFILE = REPO / "Makefile"
# What the lessons tell a learner to open in the Lab, besides the notebooks.
OPENED = ("tinyllm/weights/MODEL_CARD.md", "results/h200.json")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 1000}

# Bounded waits, in seconds: generous for a loaded 2-core machine, never open-ended.
SERVER_START_S = 90  # JupyterLab answers /api/status
SERVER_STOP_S = 30  # /api/shutdown until the process is gone
NOTEBOOK_OPEN_S = 120  # the notebook's cells are on the page and its kernel is idle
RUN_ALL_S = 300  # Run All Cells, from the click until the kernel is idle again
WIDGET_UPDATE_S = 60  # one control change until the redrawn output is shown

# The settings JupyterLab starts with (in the temporary folder, not the user's): every cell
# attached to the page (the default windowing skips rendering off-screen cells), and no
# request to the Jupyter news feed.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


@dataclass(frozen=True)
class Explorer:
    name: str  # the tinyllm.course.widgets function, and the screenshot's name
    notebook: str  # the notebook that shows it
    control: str  # the description of the control the test moves
    kind: str  # "slider" (moved by keyboard on its handle) or "dropdown"
    figures: int  # how many figures it shows, before and after the change


EXPLORERS = [
    Explorer("mask_explorer", "02_static_shapes.ipynb", "position", "slider", figures=1),
    Explorer("bucket_explorer", "03_buckets.ipynb", "growth", "slider", figures=1),
    Explorer("timing_explorer", "01_launch_bound_decode.ipynb", "batch", "dropdown", figures=2),
    Explorer("pages_explorer", "08_paged_kv.ipynb", "decode steps", "slider", figures=1),
]
SLIDER_PRESSES = 3  # arrow-key presses on a slider, each one a redraw


def unavailable(message: str):
    """A missing browser fails the test under CI=true, and when screenshots were asked for
    (SCREENSHOT_DIR); elsewhere it skips the test."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: the browser test must run in CI)", pytrace=False)
    if os.environ.get("SCREENSHOT_DIR"):
        pytest.fail(
            f"{message} (SCREENSHOT_DIR is set: screenshots need the browser)", pytrace=False
        )
    pytest.skip(message)


# ---------------------------------------------------------------------------------------
# JupyterLab


def make_lab_options() -> dict[str, str]:
    """The `--name=value` options of the jupyter command in the Makefile's `lab:` recipe, so
    that this test serves the Lab as `make lab` does."""
    recipe = re.search(r"^lab:.*\n((?:\t.*\n)+)", MAKEFILE.read_text(encoding="utf-8"), re.M)
    assert recipe, "the Makefile has no `lab:` target with a recipe"
    return dict(re.findall(r"--([\w.]+)=(\S+)", recipe.group(1)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def strip_outputs(path: Path):
    """Clear a notebook's outputs and execution counts. A notebook is committed with the
    outputs of a clean run; cleared, 'every code cell numbered' means this run finished, and
    the committed widget views (no widget state is saved) cannot show as stale errors."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


class Lab:
    """A JupyterLab server started as `make lab` starts it, on a copy of the repository's
    notebooks/, results/ and model card in `repo`; everything it writes under `root`."""

    def __init__(self, root: Path):
        self.root = root
        self.repo = root / "repo"
        self.notebooks = self.repo / "notebooks"
        self.options = make_lab_options()
        self.default_url = self.options["LabApp.default_url"]
        self.home = root / "home"
        self.log_path = root / "jupyterlab.log"
        self.token = secrets.token_hex(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    # -- requests ------------------------------------------------------------------------

    def request(
        self, path: str, method: str = "GET", token: str | None = "own", timeout: float = 10
    ) -> tuple[int, bytes]:
        """(status, body) of an HTTP request to the server; token "own" sends this server's
        token in the Authorization header, None sends no token."""
        req = urllib.request.Request(self.url + path, method=method)
        if token is not None:
            req.add_header("Authorization", f"token {self.token if token == 'own' else token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    # -- life cycle ----------------------------------------------------------------------

    def landing(self, path: str) -> str:
        """The path that a GET of `path`, with the token, lands on after redirects."""
        req = urllib.request.Request(self.url + path)
        req.add_header("Authorization", f"token {self.token}")
        with urllib.request.urlopen(req, timeout=10) as r:
            return urllib.parse.urlparse(r.geturl()).path

    def start(self):
        shutil.copytree(NOTEBOOKS, self.notebooks)
        shutil.copytree(REPO / "results", self.repo / "results")
        card = self.repo / OPENED[0]
        card.parent.mkdir(parents=True)
        shutil.copyfile(REPO / OPENED[0], card)
        for ex in EXPLORERS:
            if (self.notebooks / ex.notebook).exists():
                strip_outputs(self.notebooks / ex.notebook)
        settings = self.root / "lab" / "user-settings"
        for plugin, values in LAB_SETTINGS.items():
            f = settings / f"{plugin}.jupyterlab-settings"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(values))
        self.home.mkdir()

        env = dict(os.environ)
        # Figures show only under the inline backend, which ipykernel picks when MPLBACKEND
        # is unset (the unit tests run with MPLBACKEND=Agg); a fixed hash seed as in make test.
        env.pop("MPLBACKEND", None)
        env["PYTHONHASHSEED"] = "0"
        # Nothing of the user's home: configuration, data (kernel specs), runtime files,
        # IPython and matplotlib all live in the temporary folder.
        env.update(
            HOME=str(self.home),
            JUPYTER_CONFIG_DIR=str(self.root / "jupyter" / "config"),
            JUPYTER_DATA_DIR=str(self.root / "jupyter" / "data"),
            JUPYTER_RUNTIME_DIR=str(self.root / "jupyter" / "runtime"),
            IPYTHONDIR=str(self.root / "ipython"),
            MPLCONFIGDIR=str(self.root / "matplotlib"),
        )
        cmd = [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--port-retries=0",
            "--no-browser",
            f"--IdentityProvider.token={self.token}",
            # as `make lab`, run from the repository root
            f"--ServerApp.root_dir={self.options['ServerApp.root_dir']}",
            f"--LabApp.default_url={self.default_url}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={self.root / 'lab' / 'workspaces'}",
        ]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.repo,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab exited with status {self.proc.returncode} "
                    f"before answering:\n{self.log_tail()}"
                )
            try:
                if self.request("/api/status", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"JupyterLab did not answer on {self.url} within "
                    f"{SERVER_START_S} s:\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def stop(self):
        """Shut down cleanly through the API (the server stops its kernels first); if it
        does not exit in time, SIGTERM, then SIGKILL, its own process group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.request("/api/shutdown", method="POST", timeout=5)
        except OSError:
            pass
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
            try:
                self.proc.wait(timeout=SERVER_STOP_S if sig is None else 10)
                break
            except subprocess.TimeoutExpired:
                continue

    def shutdown_kernels_of(self, notebook: str):
        status, body = self.request("/api/sessions")
        if status != 200:
            return
        for s in json.loads(body):
            if Path(s.get("path", "")).name == notebook:
                self.request(f"/api/sessions/{s['id']}", method="DELETE")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = Lab(tmp_path_factory.mktemp("browser"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------
# Chromium


def require_chromium():
    if find_spec("playwright") is None:
        unavailable(
            "the playwright Python package is missing: pip install playwright "
            "(its browser download is not needed)"
        )
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(
            f"{CHROMIUM} is missing: install Debian's Chromium with `sudo apt-get install chromium`"
        )


@pytest.fixture(scope="module")
def browser(lab):
    """A Chromium context with a fresh user-data dir in the temporary folder."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        context = pw.chromium.launch_persistent_context(
            str(lab.root / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
            env={**os.environ, "HOME": str(lab.home)},
        )
        try:
            yield context
        finally:
            context.close()
    finally:
        pw.stop()


# ---------------------------------------------------------------------------------------
# The notebook in the page

CODE_PROMPTS = ".jp-CodeCell .jp-InputPrompt"
INDICATOR = ".jp-Notebook-ExecutionIndicator"

KERNEL_NAME = ".jp-NotebookPanel-toolbar .jp-KernelName"

# A kernel is connected and idle, and no cell is waiting or running. (The indicator also
# reads 'idle' before the kernel exists, while the toolbar says "No Kernel": running cells
# then would open the Select Kernel dialog.)
JS_IDLE = f"""() => {{
    const ind = document.querySelector('{INDICATOR}');
    const name = document.querySelector('{KERNEL_NAME}');
    const prompts = [...document.querySelectorAll('{CODE_PROMPTS}')].map(e => e.innerText.trim());
    return ind !== null && ind.dataset.status === 'idle' && name !== null &&
        !['', 'No Kernel'].includes(name.innerText.trim()) && !prompts.some(p => p.includes('*'));
}}"""

# The run has begun: some code cell is queued, running or done.
JS_STARTED = f"""() => [...document.querySelectorAll('{CODE_PROMPTS}')]
    .some(e => /\\[(\\*|\\d+)\\]/.test(e.innerText))"""

# The output element `out` shows `n` images, all loaded.
JS_SHOWN = """([out, n]) => {
    const imgs = [...out.querySelectorAll('img')];
    return imgs.length === n && imgs.every(i => i.complete && i.naturalWidth > 0);
}"""

# The output element `out` differs from `before` and shows `n` images, all loaded, and the
# kernel is idle. The kernel goes idle when it has sent the figures, but the page shows them
# a little later (an image output renders asynchronously), so idle alone is not enough: an
# explorer draws as many figures after the change as before it.
JS_REDRAWN = f"""([out, before, n]) => {{
    const ind = document.querySelector('{INDICATOR}');
    const imgs = [...out.querySelectorAll('img')];
    return out.innerHTML !== before && imgs.length === n &&
        imgs.every(i => i.complete && i.naturalWidth > 0) &&
        ind !== null && ind.dataset.status === 'idle';
}}"""


def open_notebook(page, lab: Lab, notebook: str):
    # `reset`: a fresh workspace, so notebooks opened by earlier tests are not restored
    page.goto(
        f"{lab.url}{lab.default_url}/{notebook}?token={lab.token}&reset",
        timeout=NOTEBOOK_OPEN_S * 1000,
    )
    page.wait_for_selector(f".jp-NotebookPanel {CODE_PROMPTS}", timeout=NOTEBOOK_OPEN_S * 1000)
    try:
        page.wait_for_function(JS_IDLE, timeout=NOTEBOOK_OPEN_S * 1000, polling=200)
    except Exception as e:
        dialog = page.locator(".jp-Dialog")
        detail = f" A dialog says: {dialog.first.inner_text()!r}" if dialog.count() else ""
        raise AssertionError(
            f"the kernel of {notebook} did not become idle within {NOTEBOOK_OPEN_S} s.{detail}"
        ) from e
    n_open = page.locator(".jp-NotebookPanel").count()
    assert n_open == 1, f"expected only {notebook} open, found {n_open} notebooks"


def run_all_cells(page, notebook: str):
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    page.wait_for_function(JS_STARTED, timeout=30_000, polling=100)
    page.wait_for_function(JS_IDLE, timeout=RUN_ALL_S * 1000, polling=250)
    prompts = [p.strip() for p in page.locator(CODE_PROMPTS).all_inner_texts()]
    not_run = [i for i, p in enumerate(prompts) if not re.fullmatch(r"\[\d+\]:", p)]
    if not_run:
        # Run All stops at the first error: show the outputs of the last cell that ran
        cells = page.locator(".jp-CodeCell")
        last = max((i for i in range(len(prompts)) if i not in not_run), default=None)
        out = cells.nth(last).locator(".jp-OutputArea").inner_text() if last is not None else ""
        raise AssertionError(
            f"{notebook}: Run All Cells stopped; code cells {not_run} (0-based) "
            f"did not run. Output of the last cell that ran:\n{out[-3000:]}"
        )


def assert_no_widget_errors(page, notebook: str):
    errors = page.get_by_text("Error displaying widget")
    if errors.count():
        raise AssertionError(
            f"{notebook}: {errors.count()} output(s) show {errors.first.inner_text()!r}"
        )


def find_explorer(page, ex: Explorer):
    """The explorer's `interactive` box (the first one with the control), and the control."""
    label = page.locator(".widget-label", has_text=re.compile(rf"^{re.escape(ex.control)}$"))
    box = page.locator(".widget-interact").filter(has=label).first
    try:
        box.wait_for(state="visible", timeout=WIDGET_UPDATE_S * 1000)
    except Exception as e:
        assert_no_widget_errors(page, ex.notebook)  # a widget that failed to show says so late
        raise AssertionError(
            f"{ex.notebook}: no {ex.name} (an interactive widget with a "
            f"control named {ex.control!r}) is shown"
        ) from e
    kind = {"slider": ".widget-slider", "dropdown": ".widget-dropdown"}[ex.kind]
    control = box.locator(kind).filter(has=label).first
    return box, control


def output_images(out) -> list[str]:
    """Digests of the output's images (their data: URLs hold the PNG bytes)."""
    srcs = out.locator("img").evaluate_all("imgs => imgs.map(i => i.src)")
    return [hashlib.sha256(src.encode()).hexdigest()[:16] for src in srcs]


def change_control(page, ex: Explorer, control, out) -> list[str]:
    """Move the control step by step, waiting for each redraw; returns what was set."""

    def redrawn(action, what):
        before = out.inner_html()
        action()
        try:
            page.wait_for_function(
                JS_REDRAWN,
                arg=[out.element_handle(), before, ex.figures],
                timeout=WIDGET_UPDATE_S * 1000,
                polling=100,
            )
        except Exception as e:
            raise AssertionError(
                f"{ex.name}: within {WIDGET_UPDATE_S} s after {what}, the output did not "
                f"change to {ex.figures} figure(s); it shows {out.locator('img').count()} "
                f"figure(s) and the text {out.inner_text()[-500:]!r}"
            ) from e

    if ex.kind == "slider":
        handle = control.locator(".noUi-handle")
        now, top = (float(handle.get_attribute(a)) for a in ("aria-valuenow", "aria-valuemax"))
        key = "ArrowLeft" if now >= top else "ArrowRight"
        handle.focus()
        seen = []
        for i in range(SLIDER_PRESSES):
            redrawn(lambda: handle.press(key), f"{key} #{i + 1} on {ex.control!r}")
            seen.append(handle.get_attribute("aria-valuetext"))
        return seen
    select = control.locator("select")
    options = select.locator("option").all_inner_texts()
    assert len(options) > 1, f"{ex.name}: {ex.control!r} offers only {options}"
    current = select.evaluate("s => s.selectedIndex")
    index = (current + 1) % len(options)
    redrawn(lambda: select.select_option(index=index), f"choosing {options[index]!r}")
    return [options[index]]


# The element lies wholly in the notebook's visible area: below its toolbar, above the
# status bar (JupyterLab scrolls the notebook inside a fixed page). If not, scroll it to the
# middle and look again at the next poll: after the window is resized, JupyterLab lays out
# the panels anew a moment later, and a scroll made before that can miss.
JS_IN_VIEW = """e => {
    const r = e.getBoundingClientRect();
    const top = document.querySelector('.jp-NotebookPanel-toolbar').getBoundingClientRect().bottom;
    const bar = document.querySelector('#jp-main-statusbar');
    const bottom = bar ? bar.getBoundingClientRect().top : window.innerHeight;
    if (r.height > 0 && r.top >= top && r.bottom <= bottom) return true;
    e.scrollIntoView({block: 'center'});
    return false;
}"""


def save_screenshot(page, locator, lab: Lab, name: str) -> Path:
    """A screenshot of `locator`; the window is made tall enough for all of it first."""
    path = lab.root / "screenshots" / f"{name}.png"
    path.parent.mkdir(exist_ok=True)
    height = locator.bounding_box()["height"]
    if height + 250 > VIEWPORT["height"]:
        page.set_viewport_size({"width": VIEWPORT["width"], "height": int(height) + 250})
    try:
        try:
            page.wait_for_function(
                JS_IN_VIEW, arg=locator.element_handle(), timeout=20_000, polling=200
            )
        except Exception as e:
            raise AssertionError(
                f"{name}: could not bring the cell ({height:.0f} px high) "
                f"wholly into view for its screenshot"
            ) from e
        locator.screenshot(
            path=str(path),
            animations="disabled",
            caret="hide",
            style=".jp-cell-toolbar { visibility: hidden !important; }",
        )
    finally:
        page.set_viewport_size(VIEWPORT)
    if os.environ.get("SCREENSHOT_DIR"):
        dest = Path(os.environ["SCREENSHOT_DIR"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / path.name)
    return path


# ---------------------------------------------------------------------------------------
# Tests


def test_make_lab_serves_the_root_and_lands_in_notebooks():
    options = make_lab_options()
    assert options.get("ip") == "127.0.0.1", "make lab must listen on 127.0.0.1 only"
    assert options.get("ServerApp.root_dir") == ".", "make lab serves the repository root"
    assert options.get("LabApp.default_url") == "/lab/tree/notebooks", options
    assert not any("token" in k.lower() or "password" in k.lower() for k in options), (
        f"make lab must keep its token on: {options}"
    )


@pytest.mark.parametrize("path", ["", "/notebooks", *(f"/{p}" for p in OPENED)])
def test_server_refuses_requests_without_the_token(lab, path):
    assert lab.request(f"/api/contents{path}", token=None)[0] == 403
    assert lab.request(f"/api/contents{path}", token="not-" + lab.token)[0] == 403


def test_lab_serves_the_repository_root(lab):
    status, body = lab.request("/api/contents")
    assert status == 200
    assert {e["name"] for e in json.loads(body)["content"]} >= {"notebooks", "results", "tinyllm"}
    status, body = lab.request("/api/contents/notebooks")
    assert status == 200
    assert {e["name"] for e in json.loads(body)["content"]} >= {ex.notebook for ex in EXPLORERS}
    for path in OPENED:
        status, body = lab.request(f"/api/contents/{path}")
        assert status == 200, f"{path}: {status}"
        assert json.loads(body)["content"] == (REPO / path).read_text(encoding="utf-8"), path


def test_default_url_lands_in_notebooks(lab, request):
    assert lab.landing("/") == lab.default_url
    require_chromium()
    page = request.getfixturevalue("browser").new_page()
    try:
        page.goto(f"{lab.url}/?token={lab.token}&reset", timeout=NOTEBOOK_OPEN_S * 1000)
        items = page.locator(".jp-DirListing-content .jp-DirListing-itemText")
        items.first.wait_for(timeout=NOTEBOOK_OPEN_S * 1000)
        page.wait_for_function(
            "n => document.querySelectorAll('.jp-DirListing-content .jp-DirListing-item')"
            ".length >= n",
            arg=len(EXPLORERS),
            timeout=NOTEBOOK_OPEN_S * 1000,
        )
        listed = {t.strip() for t in items.all_inner_texts()}
        crumbs = page.locator(".jp-BreadCrumbs").first.inner_text()
        landed = urllib.parse.urlparse(page.url).path
    finally:
        page.close()
    assert landed == lab.default_url, f"the Lab opened at {landed}"
    assert {ex.notebook for ex in EXPLORERS} <= listed, f"the file browser lists {listed}"
    assert "results" not in listed, f"the file browser is at the root, not notebooks/: {listed}"
    assert "notebooks" in crumbs, f"the file browser's path is {crumbs!r}"


@pytest.mark.parametrize("ex", EXPLORERS, ids=[ex.name for ex in EXPLORERS])
def test_explorer_redraws_in_jupyterlab(lab, ex, request):
    require_chromium()  # here, not only in the fixture: a missing browser FAILS under CI
    assert (NOTEBOOKS / ex.notebook).exists(), f"notebooks/{ex.notebook} is missing"
    browser = request.getfixturevalue("browser")
    page = browser.new_page()
    page_errors = []
    page.on("pageerror", lambda err: page_errors.append(str(err)))
    page.on("console", lambda m: m.type == "error" and page_errors.append(f"console: {m.text}"))
    try:
        open_notebook(page, lab, ex.notebook)
        run_all_cells(page, ex.notebook)
        assert_no_widget_errors(page, ex.notebook)

        box, control = find_explorer(page, ex)
        out = box.locator(".widget-output").last
        box.scroll_into_view_if_needed()
        try:
            page.wait_for_function(
                JS_SHOWN,
                arg=[out.element_handle(), ex.figures],
                timeout=WIDGET_UPDATE_S * 1000,
                polling=100,
            )
        except Exception as e:
            raise AssertionError(
                f"{ex.name}: expected {ex.figures} figure(s), the output shows "
                f"{out.locator('img').count()} and the text "
                f"{out.inner_text()[-500:]!r}"
            ) from e
        before = output_images(out)

        set_to = change_control(page, ex, control, out)
        after = output_images(out)
        assert after, f"{ex.name}: no figure after setting {ex.control!r} to {set_to}"
        assert after != before, (
            f"{ex.name}: the figure did not change when {ex.control!r} was set to {set_to}"
        )
        assert_no_widget_errors(page, ex.notebook)

        cell = page.locator(".jp-CodeCell").filter(has=box).first
        save_screenshot(page, cell, lab, ex.name)
    except BaseException:
        shot = lab.root / f"failure-{ex.name}.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
        except Exception:
            pass
        print(
            f"page screenshot: {shot}\npage errors: {page_errors}\n"
            f"JupyterLab log:\n{lab.log_tail()}"
        )
        raise
    finally:
        page.close()
        try:
            lab.shutdown_kernels_of(ex.notebook)
        except OSError:
            pass  # the server is gone: the fixture's teardown reports it
