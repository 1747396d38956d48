# tensormapper service image: the API (console at /docs) and one worker process, as `mapper serve`.
#   Build: docker build -t tensormapper .
#   Run:   docker run -p 8000:8000 -v tensormapper-data:/data tensormapper
# Jobs and results live in the embedded SQLite database under /data (a volume: keep it to keep them).
# TM_* variables change the settings, e.g. -e TM_WORKERS=2, or -e TM_STORAGE=postgresql://... to share
# one database with workers elsewhere (`mapper worker`).

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY workload ./workload
COPY costmodels ./costmodels
COPY executor ./executor
COPY mapper ./mapper
COPY app ./app
COPY report ./report
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TM_HOST=0.0.0.0 \
    TM_PORT=8000 \
    TM_DATA_DIR=/data
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --create-home --uid 10001 --user-group tensormapper \
    && mkdir -p /data \
    && chown tensormapper:tensormapper /data
# the data directory is created and owned before it becomes a volume, so a new volume starts owned by the user
VOLUME /data
USER 10001:10001
WORKDIR /home/tensormapper
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('TM_PORT', '8000') + '/v1/health', timeout=2)"]
CMD ["mapper", "serve", "--no-browser"]
