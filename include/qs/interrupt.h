/* interrupt.h: Ctrl-C (SIGINT), SIGTERM and SIGHUP during a long write turned
 * into a clean stop.  Commands that write a directory through a temporary one
 * (init, export) catch the signals; the safetensors writer then fails at its
 * next chunk (QS_ESTOP, "interrupted"), the command removes what it wrote, and
 * interrupt_exit() ends the process by the same signal (a shell sees 130 for
 * Ctrl-C), so neither the result nor gigabytes of a temporary directory are
 * left behind.  A second signal ends the process at once (the handler resets
 * itself).  Nothing here is needed by code that does not call interrupt_catch. */
#ifndef QS_INTERRUPT_H
#define QS_INTERRUPT_H

/* Install the handlers (SA_RESTART: reads and writes in progress complete). */
void interrupt_catch(void);
/* The signal caught since interrupt_catch, or 0. */
int interrupt_pending(void);
/* If a signal is pending: end the process by it (default action). */
void interrupt_exit(void);

#endif
