/* Reading /proc from inside hooks: no allocation, no stdio, raw system
 * calls only (safe in a vfork child too). */
#ifndef SHIM_PROC_H
#define SHIM_PROC_H

#include <stdint.h>

/* Call fn(dirfd, name, arg) for each entry of directory path whose name is
 * a decimal number, with that number (for /proc/self/fd: the directory's
 * own descriptor is among them, close-on-exec); stops early when fn returns non-zero
 * and returns that value (0 after the last entry, -errno when path cannot
 * be opened). */
int shim_proc_each_num(const char *path, int (*fn)(int dirfd, long num, void *arg), void *arg);

/* 1 when process pid (0: this one) holds a descriptor for the socket with
 * inode ino.  Looks first where the last socket found in that process was
 * (and the numbers next to it), then where a walk of that process last saw
 * this socket, then walks /proc/PID/fd, remembering every socket it passes
 * (each answer proven by a readlink). */
int shim_proc_holds_socket(int pid, uint64_t ino);

/* Does descriptor fd of process pid refer to socket inode ino?  (One
 * readlink of /proc/PID/fd/FD.)  1 yes, 0 no, -1 no such descriptor. */
int shim_proc_fd_is_socket(int pid, int fd, uint64_t ino);

/* The children of this process (every thread's), up to max of them into
 * pids; returns how many. */
int shim_proc_children(int *pids, int max);
/* The same for process pid (0: this one). */
int shim_proc_children_of(int pid, int *pids, int max);

/* This process's seccomp mode from /proc/self/status (0 none, 1 strict,
 * 2 filter), -1 when unknown. */
int shim_proc_seccomp_mode(void);


/* Whether the program an exec starts honours LD_PRELOAD: a dynamically
 * linked ELF (it has PT_INTERP), or a "#!" script whose interpreter is one,
 * and not set-user/group-ID to another identity (secure execution ignores
 * LD_PRELOAD).  The program is file (searched in PATH when search is set
 * and file has no '/') or, with fd >= 0, that open file (fexecve).
 * Returns 1 yes, 0 no, -1 cannot tell. */
int shim_exec_image_preloads(const char *file, int search, int fd);
#endif
