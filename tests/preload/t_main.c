/* main() for the program variant of a preload test. */
#include "t_common.h"

int main(void)
{
    int rc = t_check_active();

    if (rc != T_PASS)
        return rc;
    rc = t_main();
    if (rc == T_PASS)
        printf("pass\n");
    return rc;
}
