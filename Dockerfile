# tensormapper service image. Build: docker build -t tensormapper .   Run: docker run -p 8000:8000 tensormapper
FROM python:3.11-slim AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TM_HOST=0.0.0.0 \
    TM_PORT=8000

WORKDIR /srv/tensormapper
COPY pyproject.toml README.md ./
COPY workload ./workload
COPY costmodels ./costmodels
COPY executor ./executor
COPY mapper ./mapper
COPY app ./app
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 tensormapper
USER 10001

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD ["python", "-c", "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"TM_PORT\", \"8000\")}/health')"]
CMD ["python", "-m", "app"]
