# toolhost as an MCP server over Streamable HTTP.
#
#   podman build -t toolhost .            (or docker build)
#   podman run -p 8080:8080 -e TOOLHOST_TOKEN=change-me --read-only \
#       -v "$PWD/my-plugins:/plugins:ro" -v toolhost-cache:/cache toolhost
#
# The image carries the example plugins in /plugins; mount your own
# directory over it. /cache holds compiled plugins (keyed by content and
# engine), so a restart does not recompile; replicas that share the volume
# need TOOLHOST_CACHE_KEY, a secret sealing its entries (without it an entry
# is loaded only from a directory of toolhost's own user that nobody else
# may write). It runs as uid 10001 and writes nothing outside /cache, so the
# root file system can be read-only.
#
# Trust is shipped, never taken at start: the lock file (grants bound to
# plugin digests) is /etc/toolhost/toolhost.lock, read-only, and the host
# runs `--locked` (TOOLHOST_LOCKED): it refuses to start when the lock is
# missing, and a plugin the lock does not name runs without its grants.
# Mount your own (prepared with `host --plugins DIR trust NAME`) over it
# with your plugins; the one here names none, as the example plugins are
# granted nothing.
#
# Two ways to fill it:
# - the default target compiles toolhost from this checkout in a Rust
#   image (`BUILDER`);
# - `--target prebuilt` copies what `cargo xtask image` put in
#   `target/image/` (the `host` binary and the plugins), built on a
#   machine with the same C library as `BASE`. The tests build the image
#   this way, from a base image made with debootstrap from Debian's
#   packages when no registry is reachable (docs/guide/deployment.md).
#
# `BASE` is the runtime's base image: Debian bookworm or anything with its
# C library.

ARG BASE=debian:bookworm-slim
ARG BUILDER=rust:1.95-bookworm

FROM ${BUILDER} AS build
WORKDIR /src
COPY . .
RUN rustup target add wasm32-wasip2 \
 && cargo xtask plugins \
 && cargo build --release -p toolhost-cli \
 && mkdir -p /out/plugins \
 && cp target/release/host /out/host \
 && cp target/plugins/*.wasm /out/plugins/ \
 && (cp target/plugins/*.toml /out/plugins/ 2>/dev/null || true)

FROM ${BASE} AS runtime
# CA certificates for plugins' HTTPS; a debootstrap base has them already.
RUN if [ ! -s /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends ca-certificates \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin toolhost \
 && mkdir -p /cache /plugins /etc/toolhost \
 && chown toolhost /cache \
 && printf '# toolhost.lock: the code each plugin'"'"'s grants were given to.\n' > /etc/toolhost/toolhost.lock \
 && chmod 0444 /etc/toolhost/toolhost.lock
USER 10001
VOLUME ["/cache"]
EXPOSE 8080
# The entries go in a directory host makes (0755): a volume's own root may
# be writable by anyone (an emptyDir is 0777).
ENV TOOLHOST_CACHE_DIR=/cache/components \
    TOOLHOST_LOCK=/etc/toolhost/toolhost.lock \
    TOOLHOST_LOCKED=true \
    TOOLHOST_APPROVALS=/cache/toolhost.approvals.json
# A non-loopback address needs a token: set TOOLHOST_TOKEN.
ENTRYPOINT ["host", "--plugins", "/plugins", "serve", "--listen", "0.0.0.0:8080", "--token-env", "TOOLHOST_TOKEN", "--stateless"]

FROM runtime AS prebuilt
COPY target/image/host /usr/local/bin/host
COPY target/image/plugins/ /plugins/

FROM runtime AS image
COPY --from=build /out/host /usr/local/bin/host
COPY --from=build /out/plugins/ /plugins/
