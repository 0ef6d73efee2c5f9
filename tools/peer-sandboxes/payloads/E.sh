# E: write to an inherited descriptor 5 (the caller opened a log for append on it)
echo PAYLOAD-START
ls -l /proc/self/fd/ 2>&1 | sed 's/^/E: /'
if { echo LEAK >&5; } 2>/dev/null; then echo "E: write to fd 5 ok"; else echo "E: write to fd 5 failed"; fi
