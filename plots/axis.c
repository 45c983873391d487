/* axis.c: "nice" axis ticks (1, 2, 5 x 10^k steps) and their labels. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_impl.h"

int axis_ticks_impl(double lo, double hi, int max_ticks, double *ticks, double *step_out)
{
    if (!(hi > lo)) {
        ticks[0] = lo;
        *step_out = 1.0;
        return 1;
    }
    if (max_ticks < 2)
        max_ticks = 2;
    double raw = (hi - lo) / (max_ticks - 1), mag = pow(10.0, floor(log10(raw)));
    double step = mag;
    static const double mults[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++) {
        step = mults[i] * mag;
        if ((floor(hi / step) - ceil(lo / step)) + 1 <= max_ticks)
            break;
    }
    int n = 0;
    for (double k = ceil(lo / step - 1e-9); k * step <= hi + 1e-9 * step && n < max_ticks; k++)
        ticks[n++] = k * step == 0 ? 0.0 : k * step;
    *step_out = step;
    return n;
}

void axis_label_impl(char *buf, int n, double v, double step)
{
    double a = fabs(v);
    if (v == 0) {
        snprintf(buf, (size_t)n, "0");
    } else if (a >= 1e5 || a < 1e-3) {
        /* scientific with as many digits as the step needs: 1e-5, 2.5e-5 */
        int digits = 0;
        double m = v / pow(10.0, floor(log10(a)));
        while (digits < 3 && fabs(m * pow(10, digits) - round(m * pow(10, digits))) > 1e-6)
            digits++;
        snprintf(buf, (size_t)n, "%.*fe%d", digits, m, (int)floor(log10(a)));
    } else {
        int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
        snprintf(buf, (size_t)n, "%.*f", decimals > 6 ? 6 : decimals, v);
    }
}
