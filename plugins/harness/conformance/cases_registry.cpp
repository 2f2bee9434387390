// The registry of the plugin folders' harness cases (cases.h: TRT_PLUGIN_KIT_HARNESS_CASES).
#include "conformance/cases.h"

namespace harness
{
namespace
{
// Function-local: registrations run from other translation units' static initializers.
std::vector<CaseAdder>& registered()
{
    static std::vector<CaseAdder> adders;
    return adders;
}
}  // namespace

CaseRegistration::CaseRegistration(CaseAdder add)
{
    registered().push_back(add);
}

Suite allCases()
{
    Suite suite;
    for (CaseAdder add : registered()) add(suite);
    return suite;
}

}  // namespace harness
