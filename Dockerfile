# toolhost as an MCP server over Streamable HTTP.
#
#   docker build -t toolhost .
#   docker run -p 8080:8080 -e TOOLHOST_TOKEN=change-me \
#       -v "$PWD/my-plugins:/plugins:ro" -v toolhost-cache:/cache toolhost
#
# The image carries the example plugins in /plugins; mount your own
# directory over it. /cache holds compiled plugins (keyed by content and
# engine), so a restart or a second replica sharing the volume does not
# recompile. Nothing here was built on the machine the project is developed
# on (it has no Docker engine); see deploy/README.md.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN rustup target add wasm32-wasip2 \
 && cargo xtask plugins \
 && cargo build --release -p toolhost-cli \
 && mkdir -p /out/plugins \
 && cp target/release/host /out/host \
 && cp target/plugins/*.wasm /out/plugins/ \
 && (cp target/plugins/*.toml /out/plugins/ 2>/dev/null || true)

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin toolhost \
 && mkdir -p /cache /plugins \
 && chown toolhost /cache
COPY --from=build /out/host /usr/local/bin/host
COPY --from=build /out/plugins/ /plugins/
USER 10001
VOLUME ["/cache"]
EXPOSE 8080
ENV TOOLHOST_CACHE_DIR=/cache \
    TOOLHOST_LOCK=/cache/toolhost.lock
# A non-loopback address needs a token: set TOOLHOST_TOKEN.
ENTRYPOINT ["host", "--plugins", "/plugins", "serve", "--listen", "0.0.0.0:8080", "--token-env", "TOOLHOST_TOKEN", "--stateless"]
