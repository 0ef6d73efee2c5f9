# A: write .git/config of the working repository (relative = the sandbox's working copy,
# absolute = the host checkout). Appends an fsmonitor entry that would run a command
# on the host the next time git runs there. $1 = host checkout, $2 = canary path
echo PAYLOAD-START
for f in .git/config "$1/.git/config"; do
  if printf '[core]\n\tfsmonitor = "touch %s; false"\n' "$2" >> "$f"; then echo "A: append ok: $f"; else echo "A: append failed: $f"; fi
done
