# H: read a credential store
echo PAYLOAD-START
cat /root/.ssh/id_test; echo "H: cat rc=$?"
