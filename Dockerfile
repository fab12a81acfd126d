# qcache container image: build with the Rust toolchain, run on a slim Debian as non-root.
#   docker build -t qcache .
#   docker run -p 3307:3307 -p 9307:9307 -e QCACHE_UPSTREAM=db:3306 qcache

FROM rust:1-slim-bookworm AS build
WORKDIR /src
# Dependencies first, so that a source change does not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && echo 'fn main() {}' > benches/analysis.rs && echo 'fn main() {}' > benches/cache.rs \
    && cargo build --release --locked --bin qcache || true
COPY src ./src
COPY benches ./benches
RUN touch src/main.rs src/lib.rs && cargo build --release --locked --bin qcache \
    && strip target/release/qcache

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin qcache \
    && mkdir -p /run/qcache && chown 10001 /run/qcache
# /run/qcache: where the Unix socket goes (server.socket); a volume mounted there starts
# with this owner, so qcache may create its socket in it.
COPY --from=build /src/target/release/qcache /usr/local/bin/qcache
COPY deploy/docker/qcache.toml /etc/qcache/qcache.toml
USER 10001
EXPOSE 3307 9307
# Liveness only: readiness (/readyz) belongs to the orchestrator, which knows whether an
# unreachable database should take the instance out of service.
HEALTHCHECK --interval=10s --timeout=2s --start-period=5s --retries=3 \
    CMD curl -fsS http://127.0.0.1:9307/healthz || exit 1
# No flags: a flag would beat both the QCACHE_* variables and a mounted config. The file says
# where to listen (deploy/docker/qcache.toml); replace it, or override it with variables.
ENV QCACHE_CONFIG=/etc/qcache/qcache.toml
ENTRYPOINT ["qcache"]
