"""The gallery of real failures (notebook 11): for each symptom ``diagnose`` checks, a short
recorded run of the course's own loop that shows it, the command that recorded it, what was
changed to cause it, the fix, and a run with the fix beside it.

Data only, no I/O: :data:`GALLERY` names runs in ``data/runs/`` (``grpo_core.run_files``
reads them); a run that has not been recorded yet is simply absent, and the readers say so.
"""

from __future__ import annotations

from dataclasses import dataclass

CODE_CPU = "--profile cpu --micro-batch-size 4 --no-checkpoint"
LENGTH_CPU = "--profile cpu --no-checkpoint"


@dataclass(frozen=True)
class GalleryRun:
    """One failure, recorded.

    Attributes:
        symptom: the ``grpo_core.diagnosis.SYMPTOMS`` key the run shows.
        run: its folder name in ``data/runs/``.
        command: the command line that records it (``--out data/runs/<run>`` added).
        changed: what was changed, against the healthy run, to cause it.
        fix: what the fix does.
        fixed_run: a recorded run with the fix (or the healthy setting), or None.
        also: other symptoms the run may show as well, without being wrong (a code run
            without the stop rule hits its token budget, and the truncation example is
            experiment 3's proxy; a collapsed policy writes the same completion for the whole
            group, so its groups give no signal; a KL run collapses too).
    """

    symptom: str
    run: str
    command: str
    changed: str
    fix: str
    fixed_run: str | None = None
    also: tuple[str, ...] = ()

    @property
    def full_command(self) -> str:
        """``command`` with its ``--out``."""
        return f"{self.command} --out data/runs/{self.run}"


GALLERY: tuple[GalleryRun, ...] = (
    GalleryRun(
        symptom="no signal",
        run="gallery-no-signal-cpu",
        command=f"python -m grpo_core mbpp --problems mbpp {CODE_CPU} --steps 8 --eval-every 0",
        changed="experiment 2 on real MBPP (train split) instead of the course's problems: "
                "SmolLM2-135M passes almost no MBPP assert, so whole groups score 0",
        fix="a task at the edge of the model's ability (the course's own problems, "
            "notebook 08), a larger k, or partial credit",
        fixed_run="exp2-k8-cpu",
        also=("truncation",),
    ),
    GalleryRun(
        symptom="truncation",
        run="exp3-long-function-cpu",
        command="python -m grpo_core hacking --profile cpu --max-new-tokens 192 --steps 30 "
                "--eval-every 15 --stop-at none",
        changed="experiment 3 without its stop rule (recorded before the rule existed): each "
                "completion runs on after its code block, prose and more code, until the "
                "192-token budget cuts it",
        fix="end each completion where its code block closes (the code experiments' stop "
            "rule, stop_at='code_block'), a larger max_new_tokens, or a prompt that asks for "
            "the function alone",
        fixed_run="exp3-stop-cpu",
        also=("hacking",),
    ),
    GalleryRun(
        symptom="length gaming",
        run="gallery-length-gaming-cpu",
        command=f"python -m grpo_core length --reward detail --max-new-tokens 256 {LENGTH_CPU} "
                "--steps 10",
        changed="experiment 1's prompts with detail_reward, a tenth of a point per distinct "
                "word (a judge that likes detailed answers), and room to grow: 256 new tokens "
                "(the base model's answers to these prompts already average about 200)",
        fix="a reward that says what it wants (experiment 1's -|len - 20| asks for 20 "
            "characters), or one normalized by length",
        fixed_run="exp1-length-cpu",
        also=("truncation",),
    ),
    GalleryRun(
        symptom="hacking",
        run="exp3-stop-cpu",
        command="python -m grpo_core hacking --profile cpu --max-new-tokens 192 --steps 30 "
                "--eval-every 15",
        changed="a proxy that pays for code it never runs (long_function_reward), with the "
                "unit tests logged beside it on 115 held-out problems from step 0 on",
        fix="pay for the task itself: run the unit tests (notebook 09). The run beside it "
            "trains on defines_function, a milder proxy (it pays for defining the function "
            "asked for), not a check of the task",
        fixed_run="exp3-defines-function-cpu",
    ),
    GalleryRun(
        symptom="collapse",
        run="gallery-collapse-cpu",
        command=f"python -m grpo_core length --lr 2e-4 {LENGTH_CPU} --steps 12",
        changed="experiment 1 with a learning rate 10 times too high (2e-4 instead of 2e-5)",
        fix="the course's learning rate (2e-5), a KL penalty (beta > 0) or a higher "
            "temperature; stop earlier",
        fixed_run="exp1-length-cpu",
        also=("truncation", "no signal"),  # identical completions: equal rewards
    ),
    GalleryRun(
        symptom="KL blow-up",
        run="exp1-beta-0.04-cpu",
        command=f"python -m grpo_core length --beta 0.04 {LENGTH_CPU}",
        changed="experiment 1 with a KL penalty, beta = 0.04 (TRL's former default), at the "
                "course's learning rate: the reward drives the completions down to a few "
                "tokens the reference finds unlikely, and the per-token KL passes 1",
        fix="no free fix, a trade-off: a larger beta (0.2) holds the per-token KL down, and "
            "the reward then stays far from the target, since this reward asks for a long move "
            "from the base model and beta sets how far the policy may go. The failure to "
            "watch for is a KL that climbs while the reward does not",
        fixed_run="exp1-beta-0.2-cpu",
        also=("collapse", "no signal", "truncation"),
    ),
)

# the fixed runs that are not experiments of their own (the others: notebooks 07 to 09); the
# beta = 0.2 run is notebook 07's, recorded with this command
FIXED_RUN_COMMANDS: dict[str, str] = {
    "exp1-beta-0.2-cpu": "python -m grpo_core length --profile cpu --steps 30 --beta 0.2 "
                         "--out data/runs/exp1-beta-0.2-cpu",
}


def gallery_entry(symptom: str) -> GalleryRun:
    """The gallery's run for ``symptom`` (a ``SYMPTOMS`` key)."""
    for entry in GALLERY:
        if entry.symptom == symptom:
            return entry
    raise KeyError(f"no gallery run for {symptom!r}; symptoms: {[e.symptom for e in GALLERY]}")
