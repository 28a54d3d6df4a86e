/* Host program for the constructor variant: reports what the test library's
 * constructor found, then checks the library state once more from main. */
#include "t_common.h"

extern int t_ctor_result;

int main(void)
{
    int rc = t_check_active();

    if (rc != T_PASS)
        return rc;
    if (t_ctor_result == T_PASS)
        printf("pass (from a constructor)\n");
    return t_ctor_result;
}
