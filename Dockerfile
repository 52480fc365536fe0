# Accord in a container: assets from npm, a static Go build, and a slim
# runtime that runs as an unprivileged user. PostgreSQL is external
# (DATABASE_URL); lab hosts are reached over SSH.

# 1. Browser libraries (htmx, ECharts) from package-lock.json.
FROM node:20-bookworm-slim AS assets
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error \
 && mkdir -p static/vendor \
 && cp node_modules/htmx.org/dist/htmx.min.js node_modules/echarts/dist/echarts.min.js static/vendor/

# 2. The accord binary (static), plus static probe binaries for lab hosts
#    of both architectures.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=assets /src/static/vendor/ static/vendor/
ARG VERSION=dev
ENV CGO_ENABLED=0
RUN go tool templ generate \
 && go build -trimpath -ldflags "-X main.version=${VERSION}" -o /out/accord . \
 && GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/probe/accord-linux-amd64 . \
 && GOOS=linux GOARCH=arm64 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/probe/accord-linux-arm64 .

# 3. Runtime: the binary, CA certificates, an unprivileged user, a data
#    volume for the secret and signing keys.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/accord --create-home accord
COPY --from=build /out/accord /usr/local/bin/accord
COPY --from=build /out/probe/ /usr/local/lib/accord/probe/
USER accord
WORKDIR /var/lib/accord
VOLUME /var/lib/accord
ENV ACCORD_LISTEN=:8080 \
    ACCORD_DATA_DIR=/var/lib/accord \
    ACCORD_PROBE_DIR=/usr/local/lib/accord/probe \
    ACCORD_LOG_FORMAT=json
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/accord"]
CMD ["serve"]
