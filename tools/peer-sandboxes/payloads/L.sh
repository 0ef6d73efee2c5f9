# L: write outside the working folder
echo PAYLOAD-START
if echo x > "$1"; then echo "L: write ok"; else echo "L: write failed"; fi
