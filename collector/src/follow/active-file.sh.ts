/**
 * The sh function both remote scripts use to find the file PostgreSQL writes now, so the probe
 * (which plans) and the segment loop (which notices rotation) can never disagree about it.
 *
 * `find_active` sets `act` (its path, empty when found by listing) and `act_ino` (its inode,
 * empty when there is none): the file named for this format in `<data>/current_logfiles` when
 * that file exists, is readable and names an existing file; else the newest primary log file
 * of the directory (mtime, ties broken by sort's whole-line comparison, i.e. by inode).
 * Expects `dir`, `data`, `fmt` and `suffix` to be set (quoted) by the script.
 */
export const FIND_ACTIVE_FUNCTION = `find_active() {
  act=''
  act_ino=''
  if [ -r "$data/current_logfiles" ]; then
    act=$(sed -n "s/^$fmt //p" "$data/current_logfiles" 2>/dev/null | head -n 1)
  fi
  if [ -n "$act" ]; then
    case $act in /*) ;; *) act="$data/$act" ;; esac
    if act_ino=$(stat -L -c %i -- "$act" 2>/dev/null); then return 0; fi
  fi
  act=''
  act_ino=$(find -H "$dir" -mindepth 1 -maxdepth 1 -type f -name "*$suffix" -printf '%T@ %i\\n' 2>/dev/null | sort -n | tail -n 1 | cut -d' ' -f2)
}`;
