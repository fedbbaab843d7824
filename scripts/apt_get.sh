# Sourced by the set-up scripts: `apt_get ARGS...` runs apt-get non-interactively and, when another package job holds
# the package manager's lock, waits for it (up to APT_LOCK_TIMEOUT seconds, default 300) instead of failing with exit
# 100. `install` waits inside apt (DPkg::Lock::Timeout, the dpkg lock); `update` takes the package lists' lock, which
# that option does not cover (apt 2.6), so a lock error is retried every 5 s until the same deadline.
APT_LOCK_TIMEOUT=${APT_LOCK_TIMEOUT:-300}

apt_get() {
  local deadline=$((SECONDS + APT_LOCK_TIMEOUT)) errors rc
  errors=$(mktemp)
  while :; do
    rc=0
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" "$@" 2>"$errors" || rc=$?
    if [ "$rc" -eq 0 ]; then
      rm -f "$errors"
      return 0
    fi
    if grep -qE "Could not get lock|Unable to lock|Unable to acquire the dpkg frontend lock" "$errors" \
        && [ "$SECONDS" -lt "$deadline" ]; then
      printf '[apt] waiting for the package manager: %s\n' "$(grep -m1 -E 'Could not get lock' "$errors")" >&2
      sleep 5
      continue
    fi
    cat "$errors" >&2
    rm -f "$errors"
    return "$rc"
  done
}
