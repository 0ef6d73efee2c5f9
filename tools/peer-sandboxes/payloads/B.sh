# B: plant .git/hooks/pre-commit. $1 = host checkout, $2 = canary path
echo PAYLOAD-START
for d in .git/hooks "$1/.git/hooks"; do
  if printf '#!/bin/sh\ntouch %s\n' "$2" > "$d/pre-commit" && chmod +x "$d/pre-commit"; then echo "B: hook written: $d/pre-commit"; else echo "B: hook write failed: $d/pre-commit"; fi
done
