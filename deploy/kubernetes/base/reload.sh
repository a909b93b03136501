# Sends the locker SIGHUP when its config changes. The pod's `reload`
# container (statefulset.yaml) runs it with the locker image's own shell:
#
#   sh reload.sh PATH...
#
# Each PATH is a file (the pod's /etc/locker/locker-N.toml) or a folder
# (every file in it, as --rls-config's). Every RELOAD_EVERY seconds (5 by
# default) it takes `cksum` of each; when the sums differ from the last it
# sends SIGHUP to each process named RELOAD_PROCESS (`locker` by default)
# that runs `serve`, found with `pidof`: the pod shares one process
# namespace (shareProcessNamespace: true), so this container sees the
# locker's. Other processes of that name (a `kubectl exec ... locker
# stats`) are left alone.
#
# The kubelet updates a mounted ConfigMap by writing a new folder and
# swapping the `..data` link to it, so a file is read whole, old or new.
# An edit that leaves these files as they were (another member's file)
# sends nothing; one that makes a file invalid is sent too, and the locker
# logs the error and keeps its limits (docs/operations.md, "Reloading the
# config"). The sums at its own start are its baseline, and send nothing:
# the locker, started with the pod, read those files.
#
# Only `sh`, `cksum`, `pidof`, `tr`, `sed` and `sleep`, which the image's
# Debian base holds: the image installs nothing for it. RELOAD_PROCESS is
# for running it outside a pod (deploy/kubernetes/tests gives the locker
# it starts a name of its own, so that no other locker is signalled).

every=${RELOAD_EVERY:-5}
name=${RELOAD_PROCESS:-locker}
if [ $# -eq 0 ]; then
  echo "usage: sh reload.sh PATH..." >&2
  exit 2
fi

sums() {
  for path in "$@"; do
    if [ -d "$path" ]; then
      cksum "$path"/* 2>&1
    else
      cksum "$path" 2>&1
    fi
  done
}

# A stop ends the wait at once: the container stops with the pod, not
# after the sleep.
trap 'exit 0' TERM INT

last=$(sums "$@")
echo "watching $* every $every s"
while :; do
  sleep "$every" &
  wait $!
  now=$(sums "$@")
  [ "$now" = "$last" ] && continue
  last=$now
  sent=
  for pid in $(pidof "$name"); do
    [ "$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 2p)" = serve ] || continue
    kill -HUP "$pid" && sent="$sent $pid"
  done
  if [ -n "$sent" ]; then
    echo "changed: SIGHUP to $name serve (pid$sent)"
  else
    echo "changed, but no $name serve runs: it reads the file when it starts"
  fi
done
