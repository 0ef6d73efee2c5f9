# K: stop our own process group (and so whatever else shares it)
echo PAYLOAD-START
kill -STOP 0
echo "K: resumed"
