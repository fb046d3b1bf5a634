# redis-seckill in a server image: the module built in a Rust stage, then
# copied with mode 0755 (Redis and Valkey refuse a module file without an
# execute bit) to the conventional path, and loaded by the command.
#
#   docker build -t redis-seckill .                      Redis (the default target)
#   docker build -t valkey-seckill --target valkey .     Valkey
#   docker run --rm -p 6379:6379 redis-seckill
#
# The images are build arguments (REDIS_IMAGE, VALKEY_IMAGE, RUST_IMAGE):
# any Debian 12 based server image with Redis 7.0+ or Valkey 8+ works; the
# module needs glibc 2.34 or later. Arguments after the image replace the
# command, so pass the whole line: `docker run redis-seckill redis-server
# --loadmodule /usr/lib/redis/modules/libredis_seckill.so --appendonly yes`.
# `COPY --chmod` needs BuildKit (Docker 23+'s default builder) or podman.
# `make docker-test` (tools/docker-test.sh) builds both targets with podman
# over base images made from Debian 12 packages and runs each image's server.

ARG RUST_IMAGE=docker.io/library/rust:1-bookworm
ARG REDIS_IMAGE=docker.io/library/redis:7.2-bookworm
ARG VALKEY_IMAGE=docker.io/valkey/valkey:8.1-bookworm

FROM ${RUST_IMAGE} AS build
# bindgen (in redis-module's build) needs libclang.
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY bench/loadgen bench/loadgen
COPY src src
RUN cargo build --release --locked -p redis-seckill \
    && strip --strip-debug --strip-unneeded -o /libredis_seckill.so target/release/libredis_seckill.so

FROM ${VALKEY_IMAGE} AS valkey
COPY --from=build --chmod=0755 /libredis_seckill.so /usr/lib/valkey/libredis_seckill.so
COPY --chmod=0644 functions/seckill.lua LICENSE /usr/share/redis-seckill/
CMD ["valkey-server", "--loadmodule", "/usr/lib/valkey/libredis_seckill.so"]

FROM ${REDIS_IMAGE} AS redis
COPY --from=build --chmod=0755 /libredis_seckill.so /usr/lib/redis/modules/libredis_seckill.so
COPY --chmod=0644 functions/seckill.lua LICENSE /usr/share/redis-seckill/
CMD ["redis-server", "--loadmodule", "/usr/lib/redis/modules/libredis_seckill.so"]
