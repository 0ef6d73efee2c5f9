# F/G: connect to a host Unix socket server. argv[1] = socket path
import socket, sys
print("PAYLOAD-START", flush=True)
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
except OSError as e:
    print("connect failed: socket(AF_UNIX) itself refused:", e); sys.exit()
try:
    s.connect(sys.argv[1]); s.sendall(b"HELLO\n"); print("connect ok", sys.argv[1])
except OSError as e:
    print("connect failed", sys.argv[1], e)
