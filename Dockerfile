# Multi-stage build: compile in the Rust image, ship the binary on distroless
# (glibc + libgcc, no shell), as the unprivileged nonroot user.
#
#   docker build --build-arg VGPU_SCHEDULER_REVISION=$(git rev-parse HEAD) \
#     -t vgpu-scheduler:0.1.0 .
#
# (.git stays out of the build context: the revision reported by hami_build_info
# comes from the build argument.)

FROM rust:1-bookworm AS builder
WORKDIR /src
# Dependencies first, so a source change does not refetch the crates.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs benches/filter.rs benches/loadgen.rs benches/planner.rs \
 && cargo fetch --locked \
 && rm -rf src benches
COPY . .
ARG VGPU_SCHEDULER_REVISION=unknown
ENV VGPU_SCHEDULER_REVISION=${VGPU_SCHEDULER_REVISION}
RUN cargo build --release --locked \
 && install -D -m 0755 target/release/vgpu-scheduler /out/vgpu-scheduler

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/vgpu-scheduler /usr/local/bin/vgpu-scheduler
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/vgpu-scheduler"]
CMD ["serve"]
