# syntax=docker/dockerfile:1
#
# The locker in a small image:
#
#   docker build -t locker .
#   docker run --rm -p 7777:7777 -p 9090:9090 locker
#
# or `docker compose up -d` (docker-compose.yml: examples/limits.toml
# mounted over the image's config). For Kubernetes (deploy/kubernetes),
# tag it for your registry and push it:
#
#   docker build -t registry.example.com/locker:1.0 .
#   docker push registry.example.com/locker:1.0
#
# The StatefulSet runs this image's `locker serve` with flags of its own
# and one config file per pod (docs/operations.md, "On Kubernetes"), and
# beside it the same image's `sh` on deploy/kubernetes/base/reload.sh,
# which uses `cksum`, `pidof`, `tr`, `sed` and `sleep` of the Debian base:
# a base without them would need that container's image changed too.
#
# The first stage builds the binary (the zmq crate compiles its bundled
# libzmq with libsodium for CURVE, which needs a C++ compiler and make: the
# rust image has both); the second holds only the binary, run as an
# unprivileged user.

# Pinned: the same build every time. Move both on purpose, together.
ARG RUST_VERSION=1.95.0
ARG DEBIAN_RELEASE=bookworm
ARG DEBIAN_SNAPSHOT=bookworm-20241111

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
COPY examples ./examples
# The patched zmq-sys that builds libzmq with libsodium.
COPY vendor ./vendor
# The caches keep the registry and the compiled dependencies between builds;
# the binary is copied out of the cached target directory.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --bin locker \
    && install -m 0755 target/dist/locker /usr/local/bin/locker

FROM debian:${DEBIAN_SNAPSHOT}-slim
# libzmq and libsodium are linked statically; the binary needs only libc
# and libstdc++, which the slim image has.
# A fixed numeric uid and gid, so that Kubernetes' runAsNonRoot can tell
# the user is not root (it cannot from a name) and the manifests'
# runAsUser and fsGroup name the same ids (deploy/kubernetes).
RUN groupadd --gid 10001 locker \
    && useradd --uid 10001 --gid locker --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin locker \
    && mkdir -p /etc/locker
COPY --from=build /usr/local/bin/locker /usr/local/bin/locker
COPY contrib/locker.toml /etc/locker/locker.toml
USER 10001:10001
# 7777: the REP socket clients ask; 9090: metrics and health, as the
# image's config binds them (a mounted file that binds neither needs
# `--bind 'tcp://*:7777' --metrics-bind 0.0.0.0:9090`, as the compose file
# passes).
EXPOSE 7777 9090
# Mount your own file over /etc/locker/locker.toml; flags after the image
# name are added to these (a flag wins over the file).
# Healthy while the locker answers 200 `serving` on its metrics port
# (joining peers, a full state disk or a stop make it unhealthy); the
# binary asks, so the slim image needs no curl.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD ["/usr/local/bin/locker", "health", "--metrics", "127.0.0.1:9090", "--timeout", "2s"]
ENTRYPOINT ["/usr/local/bin/locker", "serve", "--config", "/etc/locker/locker.toml"]
