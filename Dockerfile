# syntax=docker/dockerfile:1
# The kairos service image: `docker build -t kairos .` at the workspace root.
#
# Build stage: the release build of the `kairos-cli` package, whose only binary is `kairos`
# (the same `target/release/kairos` as `cargo build --release` on a workstation). Queries are
# checked at run time, so the build needs no database; TLS is rustls, so no OpenSSL.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    cargo build --release --locked -p kairos-cli

# Runtime stage: Debian slim with the CA bundle (TLS to NATS, OTLP collectors) and curl for
# the health check, running as an unprivileged user.
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 kairos \
    && useradd --system --uid 10001 --gid kairos --home-dir /var/lib/kairos \
       --create-home --shell /usr/sbin/nologin kairos
# The defaults are compiled into the binary (config/default.toml); this file layers over them
# and starts empty: mount your own over it, or set KAIROS_<SECTION>__<KEY> variables.
RUN mkdir -p /etc/kairos \
    && printf '%s\n' \
       '# kairos settings layered over the compiled-in defaults (config/default.toml).' \
       '# Only the keys to change; KAIROS_<SECTION>__<KEY> environment variables win over them.' \
       > /etc/kairos/kairos.toml
COPY --from=build /src/target/release/kairos /usr/local/bin/kairos
COPY LICENSE /usr/share/doc/kairos/LICENSE
# Listen on every interface of the container. `auth.mode = none` is refused off loopback, so
# a container needs KAIROS_AUTH__MODE=tokens (with KAIROS_AUTH__TOKENS) or jwt: see compose.yaml.
ENV KAIROS_HTTP__BIND=0.0.0.0:8080 \
    KAIROS_LOG__FORMAT=json
EXPOSE 8080
USER kairos:kairos
WORKDIR /var/lib/kairos
# Liveness: the process answers HTTP. (/readyz also checks PostgreSQL and NATS.)
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["curl", "--fail", "--silent", "--show-error", "--max-time", "2", "http://127.0.0.1:8080/healthz"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/kairos", "serve"]
CMD ["--config", "/etc/kairos/kairos.toml"]
