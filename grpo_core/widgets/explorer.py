"""The run explorer (notebook 11): scrub through a recorded run step by step and read what the
model wrote while its curves moved.

Pick a run from ``data/runs/`` and a step; the explorer shows

- the run's curves (reward, spread, length, truncation, entropy, KL, held-out scores: whatever
  it logged), each with a cursor at the chosen step (:func:`curves_svg`);
- that step's groups from ``samples.jsonl``: every completion with its reward and its
  advantage, coloured by the advantage's sign (:func:`step_groups`); a run recorded without
  ``samples.jsonl`` still shows its curves and says so;
- the findings of :func:`grpo_core.diagnosis.diagnose` whose steps include this one
  (:func:`findings_at`).

Everything it shows is computed by pure functions over the run's files (:func:`step_view`,
:func:`step_view_html`), so tests read it without a browser; :func:`run_explorer` only wires
them to a dropdown and a slider. Reads the files and ``diagnose``; never the training loop.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.diagnosis import diagnose
from grpo_core.findings import FLAGGED, TRANSIENT, Diagnosis, Finding, finding_item
from grpo_core.run_files import (
    RecordedRun,
    RunsNotFoundError,
    Samples,
    eval_mean_keys,
    list_runs,
    load_run,
    read_samples,
    series,
    training_records,
)
from grpo_core.widgets._base import _ipywidgets, _View

# the curves drawn, in this order, when the run logged them (held-out means follow)
CURVE_KEYS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
    "entropy",
    "kl",
    "grad_norm",
)
NO_SAMPLES_MESSAGE = "this run was recorded without samples.jsonl: only its curves can be read"
SIGN_COLOURS = {"grpo-pos": "#1b5e20", "grpo-neg": "#b00020", "grpo-zero": "#616161"}
SIGN_BACKGROUNDS = {"grpo-pos": "#e8f5e9", "grpo-neg": "#ffebee", "grpo-zero": "#f5f5f5"}


@dataclass(frozen=True)
class Completion:
    """One recorded completion of a group (a ``samples.jsonl`` training row).

    Attributes:
        sample: its place in the group.
        text: the completion as recorded (cut at the run's ``samples_max_chars``).
        reward: the weighted total reward, or None when the row has none.
        advantage: the loop's advantage, or None.
        chars: its full length in characters; cut: True when ``text`` is shorter than that.
        truncated: True when it hit ``max_new_tokens``.
        values: each reward function's value, by name.
    """

    sample: int
    text: str
    reward: float | None
    advantage: float | None
    chars: int
    cut: bool
    truncated: bool
    values: dict[str, float]


@dataclass(frozen=True)
class Group:
    """The completions one prompt got at one step.

    Attributes:
        prompt_id: the row's ``task_id``, or its index in the run's prompt list.
        prompt: the prompt's text when it was recorded (rows without a ``task_id``), else "".
        completions: in sample order.
    """

    prompt_id: Any
    prompt: str
    completions: tuple[Completion, ...]

    @property
    def flat(self) -> bool:
        """True when every completion got the same reward: every advantage is 0."""
        rewards = {c.reward for c in self.completions}
        return len(self.completions) > 1 and len(rewards) == 1


@dataclass(frozen=True)
class StepView:
    """What the explorer shows at one step, computed by :func:`step_view`.

    Attributes:
        run: the run's name.
        step: the step shown.
        metrics: that step's metrics record ({} when the run has none for it).
        groups: that step's groups (empty without samples, or when none were kept for it).
        samples_found: False when the run has no ``samples.jsonl`` at all.
        held_out: how many held-out completions ``samples.jsonl`` has for this step.
        findings: the flagged or transient findings whose steps include this step.
        message: one sentence on what the groups part shows.
    """

    run: str
    step: int
    metrics: dict[str, Any]
    groups: tuple[Group, ...]
    samples_found: bool
    held_out: int
    findings: tuple[Finding, ...]
    message: str


def training_steps(records: Sequence[dict[str, Any]]) -> list[int]:
    """The steps of the training records (the ``"step": 0`` evaluation row is not one), sorted."""
    return sorted({int(r["step"]) for r in training_records(records) if "step" in r})


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_ROW_FIELDS = {"step", "split", "prompt_id", "prompt", "sample", "completion", "chars", "cut",
               "truncated", "reward", "advantage"}


def completion_of(row: dict[str, Any]) -> Completion:
    """A ``samples.jsonl`` row as a :class:`Completion` (reward functions' values by name)."""
    values = {k: float(v) for k, v in row.items()
              if k not in _ROW_FIELDS and _number(v) is not None}
    text = str(row.get("completion", ""))
    return Completion(sample=int(row.get("sample", 0)), text=text,
                      reward=_number(row.get("reward")), advantage=_number(row.get("advantage")),
                      chars=int(row.get("chars", len(text))), cut=bool(row.get("cut", False)),
                      truncated=bool(row.get("truncated", False)), values=values)


def step_groups(samples: Samples, step: int) -> list[Group]:
    """The training groups recorded at ``step``, in the order their prompts were written, each
    group's completions in sample order."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in samples.select(split="train", step=step):
        groups.setdefault(row.get("prompt_id"), []).append(row)
    return [Group(prompt_id=key, prompt=str(rows[0].get("prompt", "")),
                  completions=tuple(sorted((completion_of(r) for r in rows),
                                           key=lambda c: c.sample)))
            for key, rows in groups.items()]


def findings_at(diagnosis: Diagnosis, step: int) -> list[Finding]:
    """The flagged or transient findings whose evidence steps include ``step``."""
    return [f for f in diagnosis if f.status in (FLAGGED, TRANSIENT) and step in f.steps]


def record_at(records: Sequence[dict[str, Any]], step: int) -> dict[str, Any]:
    """The metrics record of ``step`` ({} when there is none); a step logged twice (a held-out
    evaluation joining its step's line) is merged, later keys winning."""
    merged: dict[str, Any] = {}
    for record in records:
        if record.get("step") == step:
            merged.update(record)
    return merged


def step_view(run: RecordedRun, step: int, *, samples: Samples | None = None,
              diagnosis: Diagnosis | None = None) -> StepView:
    """What the explorer shows for ``run`` at ``step``.

    ``samples`` and ``diagnosis`` default to the run's ``samples.jsonl`` and ``diagnose(run)``
    (pass them to avoid reading them again at every step).
    """
    samples = samples if samples is not None else (
        read_samples(run.path) if run.path is not None else Samples([], found=False, path=None))
    diagnosis = diagnosis if diagnosis is not None else diagnose(run)
    groups = step_groups(samples, step) if samples.found else []
    held_out = len(samples.select(split="held_out", step=step)) if samples.found else 0
    if not samples.found:
        message = NO_SAMPLES_MESSAGE
    elif not groups:
        message = (f"no training completions were kept for step {step} (a rollout reused for "
                   "several steps is written once, at the step that sampled it)")
    else:
        count = sum(len(g.completions) for g in groups)
        flat = sum(g.flat for g in groups)
        message = (f"step {step}: {len(groups)} group(s), {count} completions; {flat} group(s) "
                   "with every reward equal (no signal from them)")
    return StepView(run=run.name, step=step, metrics=record_at(run.records, step),
                    groups=tuple(groups), samples_found=samples.found, held_out=held_out,
                    findings=tuple(findings_at(diagnosis, step)), message=message)


def curve_keys(records: Sequence[dict[str, Any]]) -> list[str]:
    """The curves the explorer draws for these records: ``CURVE_KEYS`` that were logged, then
    the held-out means (``eval/<fn>``)."""
    logged = [key for key in CURVE_KEYS if series(records, key)[1]]
    return logged + eval_mean_keys(records)


def sign_class(value: float | None) -> str:
    """``grpo-pos``, ``grpo-neg`` or ``grpo-zero`` (also for None: no advantage recorded)."""
    if value is None or value == 0:
        return "grpo-zero"
    return "grpo-pos" if value > 0 else "grpo-neg"


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0.00"
    return f"{value:+.2f}" if signed else f"{value:.3g}"


def cursor_x(steps: Sequence[int], step: int, width: float, pad: float = 4.0) -> float:
    """Where ``step`` falls on a panel ``width`` wide whose x axis spans ``steps``."""
    low, high = min(steps), max(steps)
    span = (high - low) or 1
    return pad + (width - 2 * pad) * (step - low) / span


def curves_svg(records: Sequence[dict[str, Any]], step: int, keys: Sequence[str] | None = None,
               width: int = 230, height: int = 70) -> str:
    """One small SVG panel per curve with a cursor (class ``grpo-cursor``) at ``step``.

    Every panel shares the x axis of all the run's steps (the ``"step": 0`` evaluation
    included when there is one), so the cursors line up; each title gives the value at
    ``step`` when the curve has one there.
    """
    keys = curve_keys(records) if keys is None else list(keys)
    all_steps = [int(r["step"]) for r in records if "step" in r] or [step]
    panels = []
    for key in keys:
        steps, values = series(records, key)
        if not values:
            continue
        low, high = min(values), max(values)
        span = (high - low) or 1.0
        points = " ".join(
            f"{cursor_x(all_steps, s, width):.1f},{4 + (height - 8) * (1 - (v - low) / span):.1f}"
            for s, v in zip(steps, values, strict=True))
        at = dict(zip(steps, values, strict=True)).get(step)
        x = cursor_x(all_steps, step, width)
        dots = "" if len(values) > 1 else f'<circle cx="{points.split(",")[0]}" ' \
            f'cy="{points.split(",")[1]}" r="2" fill="#1565c0"/>'
        panels.append(
            f'<div class="grpo-curve" data-key="{html.escape(key)}" style="margin:2px 6px">'
            f'<div style="font-size:11px">{html.escape(key)} = '
            f'<b class="grpo-curve-value">{_fmt(at)}</b></div>'
            f'<svg width="{width}" height="{height}" style="background:#fafafa;border:1px solid #ddd">'
            f'<polyline points="{points}" fill="none" stroke="#1565c0" stroke-width="1.5"/>{dots}'
            f'<line class="grpo-cursor" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{height}" '
            'stroke="#e65100" stroke-width="1.5"/></svg>'
            f'<div style="font-size:10px;color:#777">{_fmt(low)} .. {_fmt(high)}</div></div>')
    return '<div class="grpo-curves" style="display:flex;flex-wrap:wrap">' + "".join(panels) \
        + "</div>"


def _values_html(c: Completion) -> str:
    """Each reward function's value beside the total: the true score (weight 0) of a proxy
    run, so hacking shows in the completions too. Nothing when one function is the total."""
    shown = {name: value for name, value in c.values.items()
             if not (len(c.values) == 1 and value == c.reward)}
    return "".join(f' · {html.escape(name)} <b class="grpo-value">{_fmt(value)}</b>'
                   for name, value in shown.items())


def _completion_html(c: Completion) -> str:
    css = sign_class(c.advantage)
    flags = " ".join(x for x, on in (("truncated", c.truncated),
                                     (f"cut at {len(c.text)} of {c.chars} chars", c.cut)) if on)
    return (
        f'<div class="grpo-completion {css}" style="border-left:4px solid {SIGN_COLOURS[css]};'
        f'background:{SIGN_BACKGROUNDS[css]};margin:3px 0;padding:2px 6px">'
        f'<div style="font-size:11px">#{c.sample} reward <b class="grpo-reward">{_fmt(c.reward)}'
        f'</b> advantage <b class="grpo-advantage" style="color:{SIGN_COLOURS[css]}">'
        f'{_fmt(c.advantage, signed=True)}</b>{_values_html(c)} <span style="color:#777">'
        f'{html.escape(flags)}</span></div>'
        f'<pre class="grpo-completion-text" style="white-space:pre-wrap;margin:0;font-size:11px">'
        f'{html.escape(c.text)}</pre></div>')


def step_view_html(view: StepView, records: Sequence[dict[str, Any]] = ()) -> str:
    """The explorer's page for one step: the curves with their cursors (when ``records`` are
    given), the findings at this step, and the groups, each completion coloured by the sign of
    its advantage (green above its group's mean, red below, grey at it).

    Stable CSS classes for tests: ``grpo-step``, ``grpo-cursor``, ``grpo-finding``,
    ``grpo-group``, ``grpo-completion`` (with ``grpo-pos``/``grpo-neg``/``grpo-zero``),
    ``grpo-completion-text``, ``grpo-reward``, ``grpo-advantage``, ``grpo-samples-message``.
    """
    parts = [f'<div class="grpo-explorer" style="font-family:sans-serif">'
             f'<div><b>{html.escape(view.run)}</b>, step <b class="grpo-step">{view.step}</b></div>']
    if records:
        parts.append(curves_svg(records, view.step))
    if view.findings:
        parts.append("<div>diagnose at this step:</div><ul>"
                     + "".join(finding_item(f) for f in view.findings) + "</ul>")
    else:
        parts.append('<div class="grpo-no-findings" style="color:#555">diagnose flags nothing '
                     'at this step</div>')
    parts.append(f'<div class="grpo-samples-message" style="margin:4px 0">'
                 f'{html.escape(view.message)}</div>')
    for group in view.groups:
        title = f"prompt {group.prompt_id}" + (f": {group.prompt}" if group.prompt else "")
        flat = " (every reward equal: all advantages 0)" if group.flat else ""
        parts.append(f'<details class="grpo-group" open><summary style="font-size:12px">'
                     f'{html.escape(title)}{flat}</summary>'
                     + "".join(_completion_html(c) for c in group.completions) + "</details>")
    if view.held_out:
        parts.append(f'<div style="color:#555">and {view.held_out} held-out completions from '
                     "this step's evaluation (split held_out)</div>")
    return "".join(parts) + "</div>"


class RunExplorerView(_View):
    """The run explorer: a ``run`` dropdown, a ``step`` slider and ``output`` (an HTML widget).

    ``view.state`` is the latest :class:`StepView`; ``view.recorded`` the run shown. Moving the
    slider recomputes the page from the run's files; picking another run resets the slider to
    that run's steps.
    """

    def __init__(self, paths: dict[str, Path], start: str):
        w = _ipywidgets()
        super().__init__(controls={
            "run": w.Dropdown(options=list(paths), value=start, description="run",
                              layout=w.Layout(width="420px")),
            "step": w.IntSlider(value=1, min=0, max=1, description="step",
                                continuous_update=False, layout=w.Layout(width="520px")),
            "output": w.HTML(),
        })
        self.paths = paths
        self.run.observe(self.on_run, names="value")
        self.step.observe(self.refresh, names="value")
        self.on_run()
        self.widget = w.VBox([w.HBox([self.run, self.step]), self.output])

    def on_run(self, _change: Any = None) -> None:
        """Load the chosen run (metrics, samples, diagnosis) and put the slider on its steps."""
        self.recorded = load_run(self.paths[self.run.value])
        self.samples = read_samples(self.recorded.path)
        self.diagnosis = diagnose(self.recorded)
        steps = training_steps(self.recorded.records) or [0]
        slider, self._busy = self.step, True
        try:  # widen first, so that min never passes max on the way
            slider.max = max(slider.max, max(steps))
            slider.min = min(steps)
            slider.max = max(steps)
            slider.value = min(steps)
        finally:
            self._busy = False
        self.refresh()

    def refresh(self, _change: Any = None) -> None:
        """Recompute and redraw the page for the slider's step."""
        if getattr(self, "_busy", False):
            return
        self.state = step_view(self.recorded, int(self.step.value), samples=self.samples,
                               diagnosis=self.diagnosis)
        self.output.value = step_view_html(self.state, self.recorded.records)


def explorer_runs(root: str | Path | None = None) -> dict[str, Path]:
    """The recorded runs the explorer offers, ``{name: folder}`` (:func:`list_runs`)."""
    return {path.name: path for path in list_runs(root)}


def run_explorer(run: str | Path | RecordedRun | None = None, *,
                 root: str | Path | None = None) -> RunExplorerView:
    """The run explorer (:class:`RunExplorerView`) over the runs in ``root`` (default
    ``data/runs``), starting at ``run``: a name there, a run folder, or a
    :class:`RecordedRun` (default: the first run). A folder outside ``root`` joins the list."""
    _ipywidgets()  # a clear ImportError before anything else
    try:
        paths = explorer_runs(root)
    except RunsNotFoundError:  # an installed package without the course's runs
        if run is None:
            raise
        paths = {}  # the run given is enough
    if isinstance(run, RecordedRun):
        if run.path is None:
            raise ValueError("the explorer reads a run's folder: this RecordedRun has no path")
        run = run.path
    if run is None:
        if not paths:
            raise FileNotFoundError("no recorded runs to explore (data/runs/ is empty)")
        start = next(iter(paths))
    elif str(run) in paths:
        start = str(run)
    else:
        folder = load_run(run).path  # raises FileNotFoundError with the path it looked for
        start = folder.name if paths.get(folder.name) == folder else str(folder)
        paths.setdefault(start, folder)
    return RunExplorerView(paths, start)
