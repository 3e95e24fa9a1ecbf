# shellcheck shell=bash
# loggen, sourced by generate.sh: JSON helpers for manifest.json.

# ---------------------------------------------------------------------------------------------
# JSON helpers (all keys and most values are ASCII; strings never hold control characters)
# ---------------------------------------------------------------------------------------------
jstr() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/\\t}; printf '"%s"' "$s"; }
jstrs() { local first=1 s; printf '['; for s in "$@"; do [ $first = 1 ] || printf ', '; first=0; jstr "$s"; done; printf ']'; }
# jmap NAME: an associative array of integers as a JSON object with sorted keys.
jmap() {
  local -n m=$1
  local first=1 k
  printf '{'
  for k in $(printf '%s\n' "${!m[@]}" | LC_ALL=C sort); do
    [ $first = 1 ] || printf ', '; first=0
    printf '"%s": %s' "$k" "${m[$k]}"
  done
  printf '}'
}
# jnested NAME: an associative array keyed "outer/inner" with integer values, as nested objects.
jnested() {
  local -n nm=$1
  local k
  for k in "${!nm[@]}"; do echo "$k ${nm[$k]}"; done | LC_ALL=C sort | awk '
    { split($1, p, "/"); if (p[1] != cur) { if (cur != "") printf "}, "; else printf "{"; printf "\"%s\": {", p[1]; cur = p[1]; n = 0 }
      if (n++) printf ", "; printf "\"%s\": %s", p[2], $2 }
    END { if (cur == "") printf "{}"; else printf "}}" }'
}
jjoin() { local first=1 s; printf '['; for s in "$@"; do [ $first = 1 ] || printf ', '; first=0; printf '%s' "$s"; done; printf ']'; }
