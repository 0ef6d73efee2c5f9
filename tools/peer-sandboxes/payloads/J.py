# J: network: 1.1.1.1:80 and a host TCP listener on 127.0.0.1:argv[1]
import socket, sys
print("PAYLOAD-START", flush=True)
for host, port in (("1.1.1.1", 80), ("127.0.0.1", int(sys.argv[1]))):
    try:
        c = socket.create_connection((host, port), timeout=3); c.sendall(b"HELLO\n"); print("J: connect ok", host, port)
    except OSError as e:
        print("J: connect failed", host, port, e)
