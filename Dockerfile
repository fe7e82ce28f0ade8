# syntax=docker/dockerfile:1
# The `gc-cli` image, built from the workspace root:
#
#     docker build -t gc-cli:0.1.0 .
#
# The final stage keeps a shell and `mktemp` because the Kestra flow (`deploy/kestra/`) runs its
# commands in this image; the binary is linked against the same Debian release's glibc that the
# final stage ships, so no static linking is needed (and glibc's resolver stays usable).

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p gc-cli \
    && install -D -m 0755 target/release/gc-cli /out/gc-cli
# Shell completions and man pages, generated from the command line's own definitions.
RUN mkdir -p /out/share/bash-completion/completions /out/share/zsh/vendor-completions \
        /out/share/fish/vendor_completions.d /out/share/man/man1 \
    && /out/gc-cli completion bash > /out/share/bash-completion/completions/gc-cli \
    && /out/gc-cli completion zsh > /out/share/zsh/vendor-completions/_gc-cli \
    && /out/gc-cli completion fish > /out/share/fish/vendor_completions.d/gc-cli.fish \
    && /out/gc-cli man --out-dir /out/share/man/man1

FROM debian:bookworm-slim
# Root certificates for `--store postgres://...` over TLS and for API servers whose CA is public.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /var/lib/gc \
        --shell /usr/sbin/nologin nonroot \
    && install -d -o 65532 -g 65532 -m 0700 /var/lib/gc
COPY --from=build /out/gc-cli /gc-cli
COPY --from=build /out/share/ /usr/share/
RUN ln -s /gc-cli /usr/local/bin/gc-cli
# The embedded SQLite store and the archives, unless `--store` and `--archive-dir` say otherwise.
ENV GC_STATE_DIR=/var/lib/gc
USER 65532:65532
WORKDIR /var/lib/gc
ENTRYPOINT ["/gc-cli"]
