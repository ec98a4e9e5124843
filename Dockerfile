# syntax=docker/dockerfile:1
# One image for every process of the emulated cluster: the Ray head, the Ray workers and the dralab
# driver. Ray requires the same Ray version and the same Python patch version in all of them, so
# they are all built from this file; 3.11.7 is the patch our machines run (see docs/deploy.md), and the
# tag names the Debian release too, so it does not float.
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RAY_USAGE_STATS_ENABLED=0

WORKDIR /app

# Dependencies first (pinned, the large Ray wheel included) so that editing the code does not
# re-download them. RAY_EXTRAS=default adds Ray's dashboard and job server (for KubeRay probes and
# RayJob, see docs/deploy.md); docker compose does not need them.
ARG RAY_EXTRAS=""
COPY docker/constraints.txt docker/constraints.txt
RUN pip install -r docker/constraints.txt \
    && if [ -n "$RAY_EXTRAS" ]; then pip install -c docker/constraints.txt "ray[$RAY_EXTRAS]"; fi

# The project itself, a regular (non-editable) install.
COPY pyproject.toml README.md ./
COPY cli/ cli/
COPY core/ core/
COPY actors/ actors/
COPY replay/ replay/
RUN pip install -c docker/constraints.txt . \
    && rm -rf build ./*.egg-info \
    && dralab --version

# Scenarios are data: `dralab run scenarios/<name>.yaml` resolves them from /app.
COPY scenarios/ scenarios/
COPY docker/driver-entrypoint.sh /usr/local/bin/dralab-driver-entrypoint
RUN chmod 0755 /usr/local/bin/dralab-driver-entrypoint \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin dralab \
    && mkdir -p /data \
    && chown dralab:dralab /data

# Non-root. /data is where runs write their .dralog (a named volume in docker-compose.yml).
USER dralab
CMD ["dralab", "--help"]
