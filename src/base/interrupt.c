/* interrupt.c: signals as a stop request for long writes (see qs/interrupt.h). */
#include "qs/interrupt.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t interrupt_sig;

static void interrupt_on_signal(int sig) { interrupt_sig = sig; }

void interrupt_catch(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = interrupt_on_signal;
    sa.sa_flags = SA_RESTART | SA_RESETHAND; /* a second signal: the default action */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

int interrupt_pending(void) { return interrupt_sig; }

void interrupt_exit(void)
{
    int sig = interrupt_sig;
    if (!sig)
        return;
    fflush(NULL);
    signal(sig, SIG_DFL);
    raise(sig);
}
