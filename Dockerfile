# Multi-stage build: a cached dependency layer, then the crate, then a slim
# non-root runtime with only the binary (migrations and the nginx template
# are compiled into it).
#
# No `# syntax=` line: it would make BuildKit fetch a frontend image, which
# fails where no registry is reachable; the daemon's built-in frontend
# reads this file.

FROM rust:1.95-bookworm AS build
WORKDIR /src
# protoc and its well-known types: etcd-client's build script compiles
# etcd's gRPC definitions.
RUN apt-get update && apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev \
    && rm -rf /var/lib/apt/lists/*
# Dependencies first: this layer is rebuilt only when a manifest or the
# lock file changes, not on every source edit. The workspace names the
# test harness as a member, so cargo must find its manifest; its source
# is never built here (`cargo build` in the root builds the root package
# only), so an empty lib.rs stands for it and harness edits do not
# invalidate the layer.
COPY Cargo.toml Cargo.lock ./
COPY harness/Cargo.toml harness/
RUN mkdir src harness/src && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs harness/src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src
COPY src ./src
COPY migrations ./migrations
COPY migrations-mysql ./migrations-mysql
COPY nginx ./nginx
# Touch so cargo rebuilds the crate over the dummy of the cached layer.
RUN touch src/main.rs src/lib.rs && cargo build --release --locked

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --no-create-home seckill
COPY --from=build /src/target/release/seckill /usr/local/bin/seckill
USER seckill
EXPOSE 8000
ENV SECKILL_LISTEN=0.0.0.0:8000
ENTRYPOINT ["seckill"]
CMD ["serve"]
