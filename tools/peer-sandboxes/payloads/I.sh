# I: remove a host System V message queue. $1 = msqid
echo PAYLOAD-START
ipcs -q 2>&1 | sed 's/^/I: /'
ipcrm -q "$1"; echo "I: ipcrm rc=$?"
