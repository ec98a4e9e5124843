#!/bin/sh
# Entrypoint of the `dralab` service (docker-compose.yml): join the Ray cluster as a node with no
# CPUs, run the given command (a `dralab run ...`), leave the cluster, exit with the command's status.
#
# Why a node and not a bare driver: a Ray driver attaches to a raylet on its own host. From a
# container with no raylet, ray.init(address="ray-head:6380") fails with "No node info found ...
# when trying to resolve node to connect to". Ray's token (RAY_AUTH_MODE / RAY_AUTH_TOKEN) comes
# from the environment and is never written here.
set -eu

: "${RAY_ADDRESS:?set RAY_ADDRESS to the Ray head (host:port), e.g. ray-head:6380}"

ray start --address="$RAY_ADDRESS" --num-cpus=0 --disable-usage-stats \
    ${DRALAB_OBJECT_STORE_MEMORY:+--object-store-memory="$DRALAB_OBJECT_STORE_MEMORY"} >&2

set +e
"$@" &
child=$!
# docker stop (SIGTERM) / Ctrl-C: pass it on to the command and still leave the cluster cleanly.
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"
status=$?
while kill -0 "$child" 2>/dev/null; do
    wait "$child"
    status=$?
done
# Only this container's Ray processes (its own PID namespace): the head and workers keep running.
ray stop >/dev/null 2>&1
exit "$status"
