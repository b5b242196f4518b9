# ledgerq's container image: one static binary on an empty base, so building
# it pulls nothing from any registry.
#
# Build it with `make image` (deploy/build-image.sh): that compiles ledgerq on
# this machine (CGO_ENABLED=0, -trimpath, the version in main.version) and
# hands this file a build context that holds exactly
#
#   ledgerq                            the static binary
#   healthcheck                        a static HTTP probe for Docker/compose
#                                      healthchecks (deploy/healthcheck)
#   etc/passwd, etc/group              root and the user ledgerq (65532)
#   etc/ssl/certs/ca-certificates.crt  the build machine's CA bundle
#
# `docker build .` from the repository root does not work: the root is not
# that context. docs/deployment.md says why the image is built this way.
FROM scratch

COPY etc/ /etc/
COPY ledgerq healthcheck /

# A numeric user, so Kubernetes' runAsNonRoot can check it without reading
# /etc/passwd.
USER 65532:65532

# Inside a container the API must listen on every interface; --api-addr or
# LEDGERQ_API_ADDR given at run time still win.
ENV LEDGERQ_API_ADDR=0.0.0.0:8080
EXPOSE 8080

ENTRYPOINT ["/ledgerq"]
CMD ["serve"]
