/* Every ZCSOCK_* environment variable, declared once.
 * X(field, type, default, min, max, doc)
 *   type: BOOL (0/1, yes/no, on/off, true/false), UINT (decimal, min..max),
 *         SIZE (bytes with optional K/M/G suffix, min..max), PATH (string)
 * The README's variable table is checked against this list by the tests. */
#define ZC_CONFIG_LIST(X)                                                           \
    X(debug, UINT, 0, 0, 2,                                                         \
      "log one-line notices about fallbacks and missing features (1), or also "     \
      "every path decision (2)")                                                    \
    X(verbose, BOOL, 0, 0, 1,                                                       \
      "print the effective configuration at start-up")                              \
    X(stats, UINT, 0, 0, 2,                                                         \
      "print a key: value statistics report at exit: 1 for processes that used "    \
      "sockets, 2 for every process")                                               \
    X(log_file, PATH, 0, 0, 0,                                                      \
      "append logs and reports to this file instead of stderr; %p becomes the pid") \
    X(library, PATH, 0, 0, 0,                                                       \
      "(launcher) the libzcsock.so that zcsock run preloads")
