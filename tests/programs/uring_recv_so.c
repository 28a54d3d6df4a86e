/* uring_recv.c's program with its code, and liburing linked statically, in
 * a shared library of its own (liburing_recv.so): the program has neither a
 * DT_NEEDED entry for liburing nor an inline io_uring_setup call; the
 * library it needs has the call inline. */
int uring_recv_main(int argc, char **argv);

int main(int argc, char **argv)
{
    return uring_recv_main(argc, argv);
}
