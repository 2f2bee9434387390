// plugin_stress fuzz: collections from the spec, the corpus, mutation.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "fuzz/fuzz.h"

namespace stress::fuzz
{
//! One field being drafted: numbers (int32 or float32 values) or a string.
struct Draft
{
    harness::FieldSpec const* spec{nullptr};
    PluginFieldType type{PluginFieldType::kINT32};
    std::vector<double> numbers;
    std::string text;
    bool countNul{true};

    FuzzField field() const
    {
        if (type == PluginFieldType::kCHAR) return stringField(spec->name, text, countNul);
        if (type == PluginFieldType::kFLOAT32)
            return floatsField(spec->name, std::vector<float>(numbers.begin(), numbers.end()));
        std::vector<int32_t> ints;
        for (double v : numbers) ints.push_back(static_cast<int32_t>(v));
        return intsField(spec->name, ints);
    }
};

//! The value a field has in a collection: drafted, else its default (or the field it defaults to).
std::vector<double> effective(harness::PluginSpec const& spec, std::map<std::string, Draft> const& drafts,
                              std::string const& name)
{
    auto it = drafts.find(name);
    if (it != drafts.end()) return it->second.numbers;
    harness::FieldSpec const* f = spec.field(name);
    if (f != nullptr && !f->defaultFrom.empty()) return effective(spec, drafts, f->defaultFrom);
    return f != nullptr ? f->defaultNumbers : std::vector<double>{};
}

//! A value of element `index` of `f` within the spec's range.
double validNumber(harness::PluginSpec const& spec, harness::FieldSpec const& f,
                   std::map<std::string, Draft> const& drafts, size_t index, Rng& rng)
{
    if (!f.numberChoices.empty()) return rng.pick(f.numberChoices);
    bool const isInt = f.type == PluginFieldType::kINT32;
    std::optional<double> lo = f.min, hi = f.max;
    if (!lo && f.greaterThan) lo = *f.greaterThan + (isInt ? 1.0 : 1e-3);
    if (!f.lessThan.empty())
    {
        std::vector<double> const bound = effective(spec, drafts, f.lessThan);
        if (index < bound.size()) hi = std::min(hi.value_or(bound[index] - 1), bound[index] - 1);
    }
    if (isInt)
    {
        int64_t const low = static_cast<int64_t>(lo.value_or(-3));
        int64_t high = static_cast<int64_t>(hi.value_or(static_cast<double>(low + 8)));
        if (high - low > 64) high = low + 8;  // small, plausible values (kernels of 1..9, not of 65536)
        return static_cast<double>(rng.range(low, std::max(low, high)));
    }
    if (lo && hi) return rng.uniform(*lo, *hi);
    if (lo) return f.min && rng.chance(0.2) ? *lo : rng.uniform(*lo, *lo + 10.0);  // the boundary too
    if (hi) return rng.uniform(*hi - 10.0, *hi);
    return rng.uniform(-2.0, 2.0);
}

Draft validDraft(harness::PluginSpec const& spec, harness::FieldSpec const& f,
                 std::map<std::string, Draft> const& drafts, Rng& rng)
{
    Draft d;
    d.spec = &f;
    d.type = f.type;
    if (f.type == PluginFieldType::kCHAR)
    {
        d.text = f.stringChoices.empty() ? "text" : rng.pick(f.stringChoices);
        d.countNul = rng.chance(0.8);
        return d;
    }
    int64_t count = f.length > 0 ? f.length : (rng.chance(0.3) ? 1 : rng.range(1, 64));
    if (!f.lengthEquals.empty()) count = static_cast<int64_t>(effective(spec, drafts, f.lengthEquals).at(0));
    if (!f.lengthMultipleOf.empty())
        count = static_cast<int64_t>(effective(spec, drafts, f.lengthMultipleOf).at(0)) * rng.range(1, 64);
    for (int64_t i = 0; i < count; ++i)
        d.numbers.push_back(validNumber(spec, f, drafts, static_cast<size_t>(i), rng));
    return d;
}

//! Fields that others refer to (ranges, lengths, defaults) come first.
std::vector<harness::FieldSpec const*> draftingOrder(harness::PluginSpec const& spec)
{
    std::vector<harness::FieldSpec const*> first, then;
    for (auto const& f : spec.fields)
    {
        bool referenced = false;
        for (auto const& other : spec.fields)
            referenced = referenced || other.lessThan == f.name || other.lengthEquals == f.name ||
                         other.lengthMultipleOf == f.name || other.defaultFrom == f.name;
        (referenced ? first : then).push_back(&f);
    }
    first.insert(first.end(), then.begin(), then.end());
    return first;
}

std::map<std::string, Draft> validDrafts(harness::PluginSpec const& spec, Rng& rng,
                                         std::string const& alwaysInclude = "")
{
    std::map<std::string, Draft> drafts;
    for (auto const* f : draftingOrder(spec))
    {
        if (f->required || f->name == alwaysInclude || rng.chance(0.6))
            drafts.emplace(f->name, validDraft(spec, *f, drafts, rng));
    }
    return drafts;
}

FuzzCollection collectionOf(std::map<std::string, Draft> const& drafts, std::string origin, Rng& rng)
{
    FuzzCollection c;
    c.origin = std::move(origin);
    for (auto const& entry : drafts) c.fields.push_back(entry.second.field());
    for (size_t i = c.fields.size(); i > 1; --i) std::swap(c.fields[i - 1], c.fields[rng.below(i)]);
    return c;
}

//! Fields the spec allows: createPlugin must accept them.
FuzzCollection validCollection(std::string const& plugin, Rng& rng)
{
    FuzzCollection c = collectionOf(validDrafts(specOf(plugin), rng), "valid", rng);
    if (c.fields.empty() && rng.chance(0.3)) c.shape = FuzzCollection::Shape::kNull;
    return c;
}

//! Valid fields but for one rule of the spec: createPlugin must reject them, naming the field. Without a
//! breakable rule (no fields), a valid collection.
FuzzCollection violatingCollection(std::string const& plugin, Rng& rng, std::string& field)
{
    harness::PluginSpec const& spec = specOf(plugin);
    if (spec.fields.empty()) return validCollection(plugin, rng);
    harness::FieldSpec const& f = spec.fields[rng.below(spec.fields.size())];
    std::map<std::string, Draft> drafts = validDrafts(spec, rng, f.name);
    Draft& d = drafts.at(f.name);
    bool const isFloat = f.type == PluginFieldType::kFLOAT32, isChar = f.type == PluginFieldType::kCHAR;
    std::vector<std::string> rules{"wrong type"};
    if (f.required) rules.push_back("missing");
    if (isFloat) rules.push_back("not finite");
    if (f.min) rules.push_back("below min");
    if (f.max) rules.push_back("above max");
    if (f.greaterThan) rules.push_back("not greater");
    if (!f.numberChoices.empty() || !f.stringChoices.empty()) rules.push_back("not a choice");
    if (!f.lessThan.empty()) rules.push_back("not less");
    if (f.length > 0 || !f.lengthEquals.empty()) rules.push_back("wrong length");
    if (!f.lengthMultipleOf.empty() && effective(spec, drafts, f.lengthMultipleOf).at(0) >= 2)
        rules.push_back("not a multiple");
    std::string const rule = rng.pick(rules);
    size_t const at = d.numbers.empty() ? 0 : rng.below(d.numbers.size());
    if (rule == "missing")
        drafts.erase(f.name);
    else if (rule == "wrong type")
        d.type = isChar || isFloat ? PluginFieldType::kINT32 : PluginFieldType::kFLOAT32;
    else if (rule == "not finite")
        d.numbers[at] = std::numeric_limits<double>::quiet_NaN();
    else if (rule == "below min")
        d.numbers[at] = isFloat ? *f.min - std::max(1e-3, std::fabs(*f.min) * 0.5) : *f.min - 1;
    else if (rule == "above max")
        d.numbers[at] = isFloat ? *f.max + std::max(1e-3, std::fabs(*f.max) * 0.5) : *f.max + 1;
    else if (rule == "not greater")
        d.numbers[at] = *f.greaterThan - (rng.chance(0.5) ? 0.0 : 1.0);
    else if (rule == "not a choice" && isChar)
        d.text = d.text + "x";
    else if (rule == "not a choice")
        d.numbers[at] = *std::max_element(f.numberChoices.begin(), f.numberChoices.end()) + 1;
    else if (rule == "not less")
        d.numbers[at] = effective(spec, drafts, f.lessThan).at(at);
    else  // a length the spec does not allow: one value more
        d.numbers.push_back(d.numbers.empty() ? 1.0 : d.numbers.back());
    if (isChar && rule == "wrong type") d.numbers = {0.0};
    field = f.name;
    return collectionOf(drafts, "spec violation (" + f.name + ": " + rule + ")", rng);
}

//! The suite's field sets for `plugin` (conformance cases and rejections) as fuzz seeds.
std::vector<FuzzCollection> corpusFor(std::string const& plugin)
{
    std::vector<FuzzCollection> corpus;
    auto add = [&](harness::FieldSet fields, std::string const& label)
    {
        FuzzCollection c;
        c.origin = "suite '" + label + "'";
        PluginFieldCollection const* fc = fields.collection();
        for (int32_t i = 0; i < fc->nbFields; ++i)
        {
            PluginField const& pf = fc->fields[i];
            FuzzField f;
            f.name = pf.name;
            f.type = static_cast<int32_t>(pf.type);
            f.length = pf.length;
            if (pf.data == nullptr)
            {
                f.data = FuzzField::Data::kNull;
            }
            else if (pf.length > 0)
            {
                size_t const n =
                    static_cast<size_t>(std::min(pf.length, 1 << 20)) * harness::fieldTypeSize(pf.type);
                auto const* b = static_cast<uint8_t const*>(pf.data);
                f.bytes.assign(b, b + n);
                f.length = std::min(pf.length, 1 << 20);
            }
            c.fields.push_back(std::move(f));
        }
        corpus.push_back(std::move(c));
    };
    harness::Suite const& suite = conformanceSuite();
    for (auto const& c : suite.cases)
        if (c.plugin == plugin && inputElements(c) <= (1 << 20)) add(c.fields, c.label);
    for (auto const& r : suite.rejects)
        if (r.plugin == plugin) add(r.fields, "rejects " + r.label);
    for (auto const& s : suite.shapeErrors)
        if (s.plugin == plugin) add(s.fields, "shape error " + s.label);
    return corpus;
}

void mutate(FuzzCollection& c, Rng& rng, std::vector<DeclaredField> const& declared)
{
    auto& f = c.fields;
    auto randomIndex = [&] { return rng.below(f.size()); };
    switch (rng.below(13))
    {
        case 0:  // drop a field
            if (!f.empty()) f.erase(f.begin() + static_cast<std::ptrdiff_t>(randomIndex()));
            break;
        case 1:  // duplicate a field
            if (!f.empty()) f.push_back(f[randomIndex()]);
            break;
        case 2:  // rename
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                if (rng.chance(0.1))
                    x.nullName = true;
                else
                    x.name = mutateName(x.name, rng);
            }
            break;
        case 3:  // retype (the bytes stay, padded to the new element size)
            if (!f.empty())
                f[randomIndex()].type = static_cast<int32_t>(rng.chance(0.9) ? rng.range(0, 13) : 42);
            break;
        case 4:  // change the length
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                std::optional<int32_t> const length = randomLength(rng, int64_t{x.length} + rng.range(-1, 1));
                if (!length)
                {
                    x.data = FuzzField::Data::kHuge;
                    x.length = hugeLength(rng);
                }
                else
                {
                    x.length = *length;
                    if (x.data == FuzzField::Data::kHuge) x.data = FuzzField::Data::kOwned;
                }
            }
            break;
        case 5:  // special values in place
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                if (x.data == FuzzField::Data::kOwned && x.length > 0)
                {
                    int32_t const i = static_cast<int32_t>(rng.below(static_cast<uint64_t>(x.length)));
                    std::vector<uint8_t> value = randomValues(x.type, 1, rng);
                    size_t const at = static_cast<size_t>(i) * backingSize(x.type);
                    if (at + value.size() <= x.bytes.size())
                        std::copy(value.begin(), value.end(),
                                  x.bytes.begin() + static_cast<std::ptrdiff_t>(at));
                }
            }
            break;
        case 6:  // random bytes
            if (!f.empty())
            {
                for (auto& b : f[randomIndex()].bytes) b = static_cast<uint8_t>(rng.next());
            }
            break;
        case 7:  // an unknown field
            f.push_back(makeField(rng, mutateName(rng.pick(allFieldNames()), rng),
                                  static_cast<int32_t>(rng.range(0, 13)), 1));
            break;
        case 8:  // a field of another plugin, or a declared one with random content
        {
            if (rng.chance(0.5) || declared.empty())
            {
                f.push_back(makeField(rng, rng.pick(allFieldNames()),
                                      static_cast<int32_t>(PluginFieldType::kINT32), 1));
            }
            else
            {
                DeclaredField const& d = rng.pick(declared);
                f.push_back(makeField(rng, d.name, d.type, d.length));
            }
            break;
        }
        case 9:  // null data
            if (!f.empty()) f[randomIndex()].data = FuzzField::Data::kNull;
            break;
        case 10:  // a random string in a field
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                FuzzField s = stringField(x.name, randomString(rng), rng.chance(0.6));
                s.nullName = x.nullName;
                x = std::move(s);
            }
            break;
        case 11:  // mismatch counts: another length for an array with its content regenerated
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                x.length = static_cast<int32_t>(rng.range(0, 70));
                x.bytes = randomValues(x.type, x.length, rng);
                x.data = FuzzField::Data::kOwned;
            }
            break;
        default:  // structural
        {
            static std::vector<int64_t> const shapes{1, 2, 3, 4};
            c.shape = static_cast<FuzzCollection::Shape>(rng.pick(shapes));
            c.negativeCount = rng.chance(0.5) ? -1 : std::numeric_limits<int32_t>::min();
            break;
        }
    }
}

FuzzCollection generate(std::string const& plugin, Rng& rng, std::vector<DeclaredField> const& declared,
                        std::vector<FuzzCollection> const& corpus, std::string& violatedField)
{
    FuzzCollection c;
    violatedField.clear();
    double const p = rng.uniform();
    if (p < 0.10)
    {
        c = validCollection(plugin, rng);
    }
    else if (p < 0.20)
    {
        c = violatingCollection(plugin, rng, violatedField);
    }
    else if (p < 0.45)
    {
        c = validCollection(plugin, rng);
        c.origin = "mutated valid";
        for (int64_t n = rng.range(1, 3); n > 0; --n) mutate(c, rng, declared);
    }
    else if (p < 0.60 && !corpus.empty())
    {
        c = rng.pick(corpus);
        c.origin = "mutated " + c.origin;
        for (int64_t n = rng.range(1, 3); n > 0; --n) mutate(c, rng, declared);
    }
    else if (p < 0.85)
    {
        c.origin = "schema";
        for (auto const& d : declared)
        {
            if (rng.chance(0.7)) c.fields.push_back(makeField(rng, d.name, d.type, d.length));
            if (rng.chance(0.05)) c.fields.push_back(makeField(rng, d.name, d.type, d.length));  // duplicate
        }
        if (rng.chance(0.2))
            c.fields.push_back(
                makeField(rng, rng.pick(allFieldNames()), static_cast<int32_t>(rng.range(0, 13)), 1));
    }
    else if (p < 0.95)
    {
        c.origin = "garbage";
        for (int64_t n = rng.range(0, 6); n > 0; --n)
        {
            std::string name = rng.chance(0.5) ? rng.pick(allFieldNames()) : randomString(rng).substr(0, 64);
            c.fields.push_back(makeField(rng, name, static_cast<int32_t>(rng.range(0, 13)),
                                         static_cast<int32_t>(rng.range(0, 4))));
        }
    }
    else
    {
        c = validCollection(plugin, rng);
        c.origin = "structural";
        static std::vector<int64_t> const shapes{1, 2, 3, 4};
        c.shape = static_cast<FuzzCollection::Shape>(rng.pick(shapes));
        c.negativeCount =
            static_cast<int32_t>(rng.chance(0.5) ? -1 : rng.range(std::numeric_limits<int32_t>::min(), -2));
        if (c.fields.empty()) c.fields.push_back(makeField(rng, rng.pick(allFieldNames()), 5, 1));
    }
    for (auto& f : c.fields) makeBacked(f, rng);
    return c;
}

}  // namespace stress::fuzz
